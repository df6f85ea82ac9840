//! `fle-node`: one ZooKeeper-style server finding its leader with Fast Leader Election, and the
//! system under test of fle-chaos. A crate of its own so the server builds and links nothing of
//! the controller (plots, SSH, HTTP client, ZooKeeper client).
//!
//! - `api`: the JSON a node serves over HTTP (the controller reads the same types);
//! - `config`: zoo.cfg + myid, in ZooKeeper's terms;
//! - `membership`: the ensemble's servers under a version, and reconfig (ZooKeeper 3.5+);
//! - `bugs`: the catalogue of seeded bugs (`--bug`), each off by default;
//! - `vote`: a vote and ZooKeeper's order on votes;
//! - `wire`: bytes <-> notifications and hellos, in ZooKeeper's layouts;
//! - `election`: lookForLeader as a deterministic state machine (no I/O);
//! - `peers`: the election transport (QuorumCnxManager) over TCP;
//! - `txnlog`: the durable log; `zab`: epochs + log on disk (`zab::store`, which the vote is
//!   made of) and discovery/sync/broadcast after an election (lead or follow);
//! - `http`: `/status`, `/write`, `/reconfig`, `/log`, `/data`, `/sync` and `/commands/leader`;
//! - `write_route`: where a client write goes (leader's Zab, forwarded, or refused);
//! - `reconfig_route`: `POST /reconfig`, a membership change proposed through the leader;
//! - `data`: the data tree every server applies its committed log to (key, value, version);
//! - `data_route`: the tree's ops, reads and syncs as a ZooKeeper client sees them;
//! - `warn_limit`: one warning line per misbehaving source per interval;
//! - `log_filter`: which log lines both binaries print (`RUST_LOG`, `FLE_CHAOS_LOG`);
//! - `server`: the tokio shell tying them together;
//! - `host_clock`: `fle-node clock-offset`, stepping a throwaway VM's system clock for
//!   `fle-chaos test --ssh --real-clock-skew`.

pub mod api;
#[cfg(test)]
mod bug_tests;
pub mod bugs;
pub mod config;
pub mod data;
pub mod data_route;
pub mod election;
pub mod follow_streak;
pub mod host_clock;
pub mod http;
pub mod lazyfs;
pub mod log_filter;
pub mod membership;
pub mod peers;
pub mod reconfig_route;
pub mod server;
pub mod txnlog;
pub mod vote;
pub mod warn_limit;
pub mod wire;
pub mod write_route;
pub mod zab;
