//! The controller's integration tests, one binary: real fle-node processes, namespaces,
//! iptables, libfaketime, sshd in fake VMs, qemu guests and Apache ZooKeeper, driven through the
//! library and through the `fle-chaos` binary as a user runs it. One module per area (its doc
//! says what it covers); `support` holds what several areas share, and `support::exclusive`
//! names the resources of this machine that two tests must not use at once, since every test
//! here runs beside every other. Run one area with `cargo test --release --test it ssh::`.
#![allow(
    clippy::too_many_lines,
    reason = "tests and benches read as scripts, top to bottom"
)]

mod support;

mod checker;
mod control;
mod docs;
mod faults;
mod nemesis;
mod report;
mod run;
mod shrink;
mod simulate;
mod ssh;
mod sweep;
mod vm;
mod zookeeper;
