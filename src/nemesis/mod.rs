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

/// What the run's machines can do, for the fault kinds that need more than a process.
#[derive(Debug, Clone, Default)]
pub struct Abilities {
    /// Nodes on their own network stacks (--net netns): partitions and packet faults.
    pub partitions: bool,
    /// Why power loss cannot run here (`None`: it can): lazyfs needs fle-node, FUSE and root.
    pub no_power_loss: Option<String>,
}

/// The schedule to run and what the default left out of it (recorded in test.json).
#[derive(Debug, Clone)]
pub struct Chosen {
    pub schedule: Schedule,
    /// One line per kind the default `mixed` dropped, naming why ("power-loss: ...").
    pub left_out: Vec<String>,
}

/// The schedule a run's flags ask for: `--nemesis-file` (a path or a built-in name) wins, then
/// `--nemesis KIND,..` (each fault lasting `interval`, with `interval` of quiet between), else the
/// built-in `mixed`. What the machines cannot do (`abilities`) is an error in an explicit
/// schedule; the default `mixed` leaves it out instead and says so in `left_out`, so a run
/// never silently tests less than it says.
pub fn schedule_from_flags(
    kinds: Option<&str>,
    file: Option<&Path>,
    interval: Duration,
    abilities: &Abilities,
) -> Result<Chosen> {
    let explicit = kinds.is_some() || file.is_some();
    let mut schedule = match (file, kinds) {
        (Some(f), _) => catalogue::load(&f.to_string_lossy())?,
        (None, Some(k)) => Schedule::from_flags(k, interval, interval)?,
        (None, None) => catalogue::load("mixed")?,
    };
    let mut left_out = Vec::new();
    if !abilities.partitions && schedule.kinds().contains(&FaultKind::Partition) {
        if explicit {
            return Err(bad_input(
                "partition faults need --net netns: loopback nodes share one network stack, so \
                 iptables cannot cut one off; drop the partition faults or run as root with --net netns",
            ));
        }
        leave_out(&mut schedule, FaultKind::Partition);
        left_out.push("partition: --net loopback (nodes share one network stack)".to_string());
    }
    if !abilities.partitions && schedule.kinds().contains(&FaultKind::Packet) {
        if explicit {
            return Err(bad_input(
                "packet faults need --net netns: loopback nodes share one network stack, so a \
                 rule for one link would hit every link; drop the packet faults or run as root \
                 with --net netns",
            ));
        }
        leave_out(&mut schedule, FaultKind::Packet);
        left_out.push("packet: --net loopback (nodes share one network stack)".to_string());
    }
    if let Some(why) = &abilities.no_power_loss {
        if schedule.kinds().contains(&FaultKind::PowerLoss) {
            if explicit {
                return Err(bad_input(format!(
                    "power-loss faults cannot run: {why}; drop the power-loss faults"
                )));
            }
            leave_out(&mut schedule, FaultKind::PowerLoss);
            left_out.push(format!("power-loss: {why}"));
        }
    }
    Ok(Chosen { schedule, left_out })
}

/// Drops every fault of `kind`, and every composed fault with a part of that kind.
pub fn leave_out(schedule: &mut Schedule, kind: FaultKind) {
    schedule
        .faults
        .retain(|f| f.kind != kind && f.with.iter().all(|p| p.kind != kind));
}

/// Why power loss cannot run on this machine (lazyfs mounts with mount(2) on /dev/fuse), if it
/// cannot.
pub fn local_power_loss_blocker() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("this machine has no /dev/fuse (lazyfs needs FUSE: modprobe fuse)".into());
    }
    if !crate::control::is_root() {
        return Some("lazyfs mounts need root (run as root)".into());
    }
    None
}

/// The nemesis that runs `schedule` (none when it has no faults).
pub fn build(schedule: Schedule) -> std::sync::Arc<dyn Nemesis> {
    if schedule.faults.is_empty() {
        std::sync::Arc::new(NoNemesis)
    } else {
        std::sync::Arc::new(runner::ScheduledNemesis::new(schedule))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn able() -> Abilities {
        Abilities {
            partitions: true,
            no_power_loss: None,
        }
    }

    #[test]
    fn the_default_mixed_has_power_loss_where_it_can_run_and_leaves_it_out_saying_why() {
        let s = Duration::from_secs(4);
        let full = schedule_from_flags(None, None, s, &able()).unwrap();
        assert!(full.schedule.kinds().contains(&FaultKind::PowerLoss));
        assert!(full.left_out.is_empty(), "{:?}", full.left_out);
        let no_fuse = Abilities {
            no_power_loss: Some("no /dev/fuse".into()),
            ..able()
        };
        let chosen = schedule_from_flags(None, None, s, &no_fuse).unwrap();
        assert!(!chosen.schedule.kinds().contains(&FaultKind::PowerLoss));
        assert_eq!(
            chosen.left_out,
            vec!["power-loss: no /dev/fuse".to_string()]
        );
        // Only the power-loss entries went: every other fault of `mixed` stays.
        let others = |c: &Chosen| {
            c.schedule
                .faults
                .iter()
                .filter(|f| f.kind != FaultKind::PowerLoss)
                .filter(|f| f.with.iter().all(|p| p.kind != FaultKind::PowerLoss))
                .count()
        };
        assert_eq!(others(&chosen), others(&full));
        assert!(chosen.schedule.faults.len() < full.schedule.faults.len());
        // Under loopback the composed entry goes with the partitions, and both are named.
        let loopback = Abilities {
            partitions: false,
            no_power_loss: None,
        };
        let chosen = schedule_from_flags(None, None, s, &loopback).unwrap();
        assert!(chosen.left_out.iter().any(|l| l.starts_with("partition:")));
        assert!(!chosen.schedule.kinds().contains(&FaultKind::Partition));
    }

    #[test]
    fn an_explicit_power_loss_where_it_cannot_run_is_one_clear_line() {
        let no_fuse = Abilities {
            no_power_loss: Some("--target zookeeper (lazyfs ...)".into()),
            ..able()
        };
        let err = schedule_from_flags(
            None,
            Some(Path::new("power-loss")),
            Duration::from_secs(4),
            &no_fuse,
        )
        .unwrap_err();
        let line = format!("{err:#}");
        assert!(
            line.starts_with("power-loss faults cannot run: --target zookeeper"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(crate::exit::code_for(&err), 254);
    }
}
