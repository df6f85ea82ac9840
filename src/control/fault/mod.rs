//! How faults are made on a node (Jepsen's `net` and friends): partitions as iptables chains
//! (`iptables`), packet faults (`packet`: the NFQUEUE engine and tbf), bytes written to an
//! election port (`frames`), damaged data files (`corrupt`), clocks (`clock`, `faketime`,
//! `faketime_shm`) and power loss (`lazyfs`).

pub mod clock;
pub mod corrupt;
pub mod faketime;
pub mod faketime_shm;
pub mod frames;
pub mod iptables;
pub mod lazyfs;
pub mod packet;
