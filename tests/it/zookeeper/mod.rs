//! Real Apache ZooKeeper as the target: an ensemble driven through the Target, and `fle-chaos test
//! --target zookeeper` end to end.
mod cluster;
mod e2e;
