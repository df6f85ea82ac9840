//! fle-chaos: a Jepsen-style chaos testing tool for ZooKeeper's Fast Leader Election.
//!
//! Two programs share this crate:
//! - `fle-node` (`node`): the system under test. ZooKeeper's Fast Leader Election over real TCP
//!   plus enough Zab (epochs, durable log, sync, broadcast) that zxids mean what they mean.
//! - `fle-chaos` (everything else): the controller, in Jepsen's vocabulary:
//!   - `control`: where nodes run (network namespaces or loopback locally, SSH hosts in
//!     `control::ssh`) and the `Target` trait through which the controller drives a cluster
//!     (fle-node, or real Apache ZooKeeper in `control::zookeeper`);
//!   - `nemesis`: the faults (kill, pause, partition, clock) and the seeded schedule;
//!   - `workload`: the clients (observe only, or writes through the leader);
//!   - `history`: the event model and its JSON-lines store;
//!   - `checker`: one checker per property, combined into a verdict;
//!   - `report`: HTML page, plots, JUnit XML, run index, `serve`.
//! - `api`: the JSON a node serves, shared by both programs.

pub mod api;
pub mod checker;
pub mod control;
pub mod exit;
pub mod history;
pub mod nemesis;
pub mod node;
pub mod report;
pub mod run;
pub mod workload;
