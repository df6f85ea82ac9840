//! The nemesis: faults and the seeded schedule that drives them.
//!
//! - `catalogue`: the schedules of `nemesis/`, built in;
//! - `schedule`: what to do (TOML files in `nemesis/` or `--nemesis` flags);
//! - `plan`: the seeded generator (same seed, same faults);
//! - `partition`: partition shapes as grudges (who drops whom);
//! - `targets`: resolving leader/random/minority/... to nodes when a fault starts.

pub mod catalogue;
pub mod clock;
pub mod iptables;
pub mod partition;
pub mod plan;
pub mod schedule;
pub mod targets;
