//! Real Apache ZooKeeper as the target: an ensemble driven through the Target, and `fle-chaos test
//! --target zookeeper` end to end. (`real_`: libtest starts tests in name order, and these hold
//! the cores one at a time: see tests/it/main.rs.)
mod cluster;
mod e2e;
