//! Disk and packet faults on real clusters: power loss through lazyfs, disk full, drops, delays and
//! corruption.
mod disk;
mod packet;
