//! The controller on other hosts: the SSH backend on fake VMs (namespaces running sshd) and on
//! qemu guests, and the guests themselves. Named `hosts` so libtest, which starts tests in name
//! order, reaches these (they hold `HeavyCluster` one at a time) between `faults` and `nemesis`,
//! not after every light test (docs/testing.md, Time).
mod ssh;
mod vm;
