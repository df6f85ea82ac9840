//! Deterministic simulation of an fle-node cluster (`fle-chaos simulate`).
//!
//! A real run explores about one fault schedule a minute. Here the same servers run in
//! virtual time, thousands of runs a minute: fle-node's own election and Zab state machines,
//! sync planning, follow back-off, fsync batch and log format (the `fle_node` crate, not a
//! copy), over a simulated network and disk. A seed fixes everything (one event queue in
//! (time, sequence) order, ChaCha randomness in one stream per purpose and link, no wall
//! clock, no hash-order iteration), so the same seed gives the same history bytes. Faults come from the same planner as a real run's,
//! the history is the same format and is judged by the same checkers. A simulated verdict is
//! evidence to confirm: a failing run keeps its faults as a timed schedule to replay with
//! `fle-chaos test` on real processes.
//!
//! - [`disk`]: the txnlog bytes and what of them is fsynced;
//! - [`net`]: which directed links pass and how long a message takes;
//! - [`streams`]: the randomness, one stream per purpose and per link, from the seed;
//! - [`server`]: one server, the node's machines behind the shell the real loops are;
//! - [`world`]: the event queue, connections, observers and clients;
//! - [`codec`]: the node's own frames, which every message crosses the network as;
//! - [`oracle`]: Zab's invariants on the servers' true state, after every event;
//! - [`nemesis`]: planned faults done to the simulated cluster;
//! - [`record`]: the history lines, with the live view, situations and observations;
//! - [`run`]: one run, judged; [`batch`]: many on every core; [`cli`]: `fle-chaos simulate`;
//!   [`explore`]: `--explore`, inputs kept and mutated for what their runs reached
//!   ([`coverage`]);
//!   [`summary`]: its summary; [`confirm`]: failures replayed on real processes;
//!   [`replay`]: a simulated failure replayed in-process under other schedules (shrink);
//! - [`scenario`]: a scripted cluster with no faults and no clients (who starts when, on which
//!   log), for tests that tell an election's story.
//!
//! What is not simulated is listed in docs/simulate.md.

pub mod batch;
pub mod cli;
pub mod codec;
pub mod confirm;
pub mod coverage;
pub mod disk;
pub mod explore;
pub mod nemesis;
pub mod net;
pub mod oracle;
pub mod record;
pub mod replay;
pub mod run;
pub mod scenario;
pub mod server;
pub mod streams;
pub mod summary;
pub mod world;
