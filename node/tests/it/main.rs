//! fle-node's integration tests, one binary: real `fle-node` processes on loopback (the seed's
//! election stories, leader kills, rejoins, seeded bugs, garbage and floods on the election
//! port, a mixed ensemble with real ZooKeeper), the election transport and Zab's shells in
//! process over real TCP, and lazyfs on a real FUSE mount. One module per area; `support` starts
//! the clusters. Every test runs beside every other: ports come from one allocator
//! (`support::free_ports`), so no two tests of this binary are handed the same port.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;

mod blackhole;
mod bugs;
mod cli;
mod cluster;
mod data;
mod flood;
mod garbage;
mod lazyfs;
mod mixed_zookeeper;
mod observers;
mod reconfig;
mod rejoin;
mod transport;
mod zab;
