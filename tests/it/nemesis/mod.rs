//! The nemesis on real clusters: aimed faults, every fault kind, and partitions.
mod aim;
mod coverage;
mod faults;
mod partition;
