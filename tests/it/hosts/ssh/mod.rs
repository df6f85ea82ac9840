//! The SSH backend: fake VMs (namespaces running sshd), real qemu guests for clock steps, preflight
//! and real ZooKeeper over SSH.
mod cluster;
mod control;
mod preflight;
mod real_clock;
mod zookeeper;
