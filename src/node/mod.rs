//! `fle-node`: one ZooKeeper-style server finding its leader with Fast Leader Election.
//!
//! - `config`: zoo.cfg + myid, in ZooKeeper's terms;
//! - `vote`: a vote and ZooKeeper's order on votes;
//! - `wire`: bytes <-> notifications and hellos, in ZooKeeper's layouts;
//! - `election`: lookForLeader as a deterministic state machine (no I/O);
//! - `peers`: the election transport (QuorumCnxManager) over TCP;
//! - `store`: acceptedEpoch/currentEpoch/last zxid on disk (Zab replaces the internals);
//! - `role`: the minimal leader/follower liveness protocol after an election (Zab replaces it);
//! - `http`: `/status` and `/commands/leader`;
//! - `txnlog`: the durable log; `zab`: recovery and broadcast after an election;
//! - `server`: the tokio shell tying them together.

pub mod config;
pub mod election;
pub mod http;
pub mod peers;
pub mod role;
pub mod server;
pub mod store;
pub mod vote;
pub mod wire;
pub mod txnlog;
pub mod zab;
