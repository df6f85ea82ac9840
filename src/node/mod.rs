//! `fle-node`: one ZooKeeper-style server finding its leader with Fast Leader Election.
//!
//! - `config`: zoo.cfg + myid, in ZooKeeper's terms;
//! - `bugs`: the catalogue of seeded bugs (`--bug`), each off by default;
//! - `vote`: a vote and ZooKeeper's order on votes;
//! - `wire`: bytes <-> notifications and hellos, in ZooKeeper's layouts;
//! - `election`: lookForLeader as a deterministic state machine (no I/O);
//! - `peers`: the election transport (QuorumCnxManager) over TCP;
//! - `txnlog`: the durable log; `zab`: epochs + log on disk (`zab::store`, which the vote is
//!   made of) and discovery/sync/broadcast after an election (lead or follow);
//! - `http`: `/status`, `/write`, `/log` and `/commands/leader`;
//! - `write_route`: where a client write goes (leader's Zab, forwarded, or refused);
//! - `server`: the tokio shell tying them together.

#[cfg(test)]
mod bug_tests;
pub mod bugs;
pub mod config;
pub mod election;
pub mod http;
pub mod peers;
pub mod server;
pub mod txnlog;
pub mod vote;
pub mod wire;
pub mod write_route;
pub mod zab;
