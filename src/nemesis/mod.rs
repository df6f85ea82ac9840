//! The nemesis: faults and the seeded schedule that drives them.
//!
//! - `catalogue`: the schedules of `nemesis/`, built in;
//! - `schedule`: what to do (TOML files in `nemesis/` or `--nemesis` flags);
//! - `plan`: the seeded generator (same seed, same faults);
//! - `timed`: the timed schedule (`[[step]]`s: these faults at these times on these nodes),
//!   for exact replays of a recorded run;
//! - `partition`: partition shapes as grudges (who drops whom);
//! - `targets`: resolving leader/random/minority/... to nodes when a fault starts;
//! - `timing`: fixed or seeded random gaps and durations;
//! - `trigger`: faults fired by what the observers see (`when = "election"`);
//! - `seam`: the `Nemesis` trait and the `NemesisContext` a run hands it (`NoNemesis`,
//!   `NemesisSettings`); `runner` is the scheduled implementation, `inject` does one fault.

pub mod catalogue;
pub mod inject;
pub mod partition;
pub mod plan;
pub mod runner;
pub mod schedule;
pub mod seam;
pub mod targets;
pub mod timed;
pub mod timing;
pub mod trigger;

pub use seam::{Nemesis, NemesisContext, NemesisSettings, NoNemesis};

use crate::exit::bad_input;
use anyhow::Result;
use schedule::{FaultKind, Schedule};
use std::path::Path;
use std::time::Duration;

/// The schedule a run's flags ask for: `--nemesis-file` (a path or a built-in name) wins, then
/// `--nemesis KIND,..` (each fault lasting `interval`, with `interval` of quiet between), else the
/// built-in `mixed`. Where nodes share one network stack (`partitions_possible` false), `mixed`
/// leaves partitions out and an explicit partition is an error.
pub fn schedule_from_flags(
    kinds: Option<&str>,
    file: Option<&Path>,
    interval: Duration,
    partitions_possible: bool,
) -> Result<Schedule> {
    let explicit = kinds.is_some() || file.is_some();
    let mut schedule = match (file, kinds) {
        (Some(f), _) => catalogue::load(&f.to_string_lossy())?,
        (None, Some(k)) => Schedule::from_flags(k, interval, interval)?,
        (None, None) => catalogue::load("mixed")?,
    };
    if !partitions_possible && schedule.kinds().contains(&FaultKind::Partition) {
        if explicit {
            return Err(bad_input(
                "partition faults need --net netns: loopback nodes share one network stack, so \
                 iptables cannot cut one off; drop the partition faults or run as root with --net netns",
            ));
        }
        schedule.faults.retain(|f| {
            f.kind != FaultKind::Partition && f.with.iter().all(|p| p.kind != FaultKind::Partition)
        });
    }
    if !partitions_possible && schedule.kinds().contains(&FaultKind::Packet) {
        if explicit {
            return Err(bad_input(
                "packet faults need --net netns: loopback nodes share one network stack, so a \
                 rule for one link would hit every link; drop the packet faults or run as root \
                 with --net netns",
            ));
        }
        schedule.faults.retain(|f| f.kind != FaultKind::Packet);
    }
    Ok(schedule)
}

/// The nemesis that runs `schedule` (none when it has no faults).
pub fn build(schedule: Schedule) -> std::sync::Arc<dyn Nemesis> {
    if schedule.faults.is_empty() {
        std::sync::Arc::new(NoNemesis)
    } else {
        std::sync::Arc::new(runner::ScheduledNemesis::new(schedule))
    }
}
