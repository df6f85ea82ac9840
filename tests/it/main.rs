//! The controller's integration tests, one binary: real fle-node processes, namespaces,
//! iptables, libfaketime, sshd in fake VMs, qemu guests and Apache ZooKeeper, driven through the
//! library and through the `fle-chaos` binary as a user runs it. One module per area (its doc
//! says what it covers); `support` holds what several areas share, and `support::exclusive`
//! names the resources of this machine that two tests must not use at once, since every test
//! here runs beside every other. Run one area with
//! `cargo test --release --test it hosts::ssh::`.
//!
//! libtest starts tests in name order. `hosts` and `real_zookeeper`, whose tests hold the cores
//! one at a time (`HeavyCluster`), are named to start among the light tests, not after them all:
//! with their chain of about 7 minutes last, the suite took a minute longer.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;

mod checker;
mod control;
mod docs;
mod faults;
mod hosts;
mod nemesis;
mod real_zookeeper;
mod report;
mod run;
mod shrink;
mod simulate;
mod sweep;
