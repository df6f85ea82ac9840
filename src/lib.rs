//! fle-chaos: a Jepsen-style chaos testing tool for ZooKeeper's Fast Leader Election.
//!
//! This crate is the controller, `fle-chaos`. The system under test, `fle-node` (ZooKeeper's
//! Fast Leader Election over real TCP plus enough Zab that zxids mean what they mean), is the
//! workspace member `node/` (crate `fle_node`), so it builds without the controller's
//! dependencies. In Jepsen's vocabulary:
//! - `control`: where nodes run (network namespaces or loopback locally, hosts over SSH) and the
//!   `Target` trait (`control::sut`, the system under test) through which the controller drives
//!   a cluster (fle-node or real ZooKeeper);
//! - `nemesis`: the faults (every kind `history::FaultKind` names) and the seeded schedule;
//! - `workload`: the clients (observe only, or writes through the leader);
//! - `history`: the event model and its JSON-lines store;
//! - `store`: the run folder as a value (`RunDir`: every file a run leaves, named once; its
//!   creation and the `latest` link; test.json and results.json loaded and saved);
//! - `checker`: one checker per property, combined into a verdict;
//! - `report`: HTML page, plots, JUnit XML, run index, `serve`;
//!
//! The commands that drive those stages live in `commands`:
//! - `run`: one test run end to end;
//! - `sweep`: many runs from a matrix (nightly jobs), shards, merge and trends.
//! - `shrink`: a failing run's smallest failing fault sequence, by delta debugging over replays.
//! - `sim`: a deterministic simulator of an fle-node cluster (`fle-chaos simulate`): the node's
//!   own machines in virtual time, judged by the same checkers.
//! - `prune`: retention for a reports folder (old run and sweep folders removed, links kept right).
//!
//! `api` is the node's JSON (`fle_node::api`), re-exported because every stage reads it;
//! `duration` writes moments and lengths of time for people.

pub use fle_node::api;

pub mod checker;
pub mod commands;
pub mod control;
pub mod duration;
pub mod exit;
pub mod history;
#[cfg(test)]
mod layers;
pub mod nemesis;
pub mod report;
pub mod store;
pub mod workload;

/// Unit tests that cannot run here say so through the integration tests' `skip` (one list).
#[cfg(test)]
#[path = "../tests/it/support/skip.rs"]
mod test_skip;
