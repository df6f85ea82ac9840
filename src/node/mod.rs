//! `fle-node`: one ZooKeeper-style server finding its leader with Fast Leader Election.
//!
//! - `config`: zoo.cfg + myid, in ZooKeeper's terms;
//! - `vote`: a vote and ZooKeeper's order on votes;
//! - `wire`: bytes <-> notifications and hellos, in ZooKeeper's layouts;
//! - `election`: lookForLeader as a deterministic state machine (no I/O);
//! - `peers`: the election transport (QuorumCnxManager) over TCP;
//! - `txnlog`: the durable log; `zab`: epochs + log on disk (`zab::store`, which the vote is
//!   made of) and discovery/sync/broadcast after an election (lead or follow);
//! - `http`: `/status`, `/write`, `/log` and `/commands/leader`;
//! - `write_route`: where a client write goes (leader's Zab, forwarded, or refused);
//! - `warn_limit`: one warning line per misbehaving source per interval;
//! - `server`: the tokio shell tying them together.

pub mod config;
pub mod election;
pub mod http;
pub mod peers;
pub mod server;
pub mod txnlog;
pub mod vote;
pub mod warn_limit;
pub mod wire;
pub mod write_route;
pub mod zab;
