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
//! - `steer`: which planned fault goes next, toward situations the run has not met;
//! - `goal`: the situation an entry is there to meet (`[fault.goal]`), which `steer` deals first;
//! - `seam`: the `Nemesis` trait and the `NemesisContext` a run hands it (`NoNemesis`,
//!   `NemesisSettings`); `inject` does one fault;
//! - `runner`: the one nemesis loop (plan, steering, goals, triggers, compositions) over an
//!   `env::NemesisEnv`; `live` drives it on a real cluster (`ScheduledNemesis`), and the
//!   simulator on virtual time (`virtual_time`).

pub mod catalogue;
pub mod env;
pub mod faults;
pub mod goal;
pub mod inject;
pub mod live;
pub mod partition;
pub mod plan;
pub mod raw_fault;
pub mod runner;
#[cfg(test)]
mod same_choices;
pub mod schedule;
pub mod schedule_file;
pub mod seam;
pub mod steer;
pub mod targets;
pub mod timed;
pub mod timing;
pub mod trigger;
pub mod units;
pub mod virtual_time;

pub use seam::{Nemesis, NemesisContext, NemesisSettings, NoNemesis};

use crate::exit::bad_input;
use anyhow::Result;
use schedule::{FaultTemplate, Schedule};
use std::path::Path;
use std::time::Duration;

/// What the run's machines can do, for the fault kinds that need more than a process.
#[derive(Debug, Clone, Default)]
pub struct Abilities {
    /// Nodes on their own network stacks (--net netns): partitions and packet faults.
    pub partitions: bool,
    /// Why power loss cannot run here (`None`: it can): lazyfs needs fle-node, FUSE and root.
    pub no_power_loss: Option<String>,
    /// Why clock faults cannot run here (`None`: they can): ZooKeeper's JVM under libfaketime.
    pub no_clock: Option<String>,
    /// Why packet faults other than loss cannot run here (`None`: they can): the engine and
    /// qdiscs work in local namespaces only.
    pub no_local_packets: Option<String>,
    /// Why a `corrupt` fault of a snapshot cannot run here (`None`: it can): fle-node keeps none.
    pub no_snapshot_file: Option<String>,
}

/// One thing the machines cannot do: the faults that need it, why not, and what to do instead.
struct Limit {
    /// Names the faults in messages ("partition", "power-loss", ...).
    label: &'static str,
    /// Whether a fault or composed part needs it.
    needs: Box<dyn Fn(&FaultTemplate) -> bool>,
    why: String,
    /// The way out offered to an explicit schedule.
    fix: String,
}

impl Limit {
    /// Whether `f` or one of its composed parts needs what is missing.
    fn hits(&self, f: &FaultTemplate) -> bool {
        f.self_and_parts().any(|f| (self.needs)(f))
    }
}

impl Abilities {
    /// Machines that can do every fault (limits are then added one by one).
    pub fn all() -> Abilities {
        Abilities {
            partitions: true,
            ..Default::default()
        }
    }

    /// What these machines cannot do, each once.
    fn limits(&self) -> Vec<Limit> {
        let loopback = "--net loopback (nodes share one network stack)";
        let mut limits = Vec::new();
        // Each kind that needs what is missing, by its `Needs`.
        for fault in faults::FAULTS {
            let (kind, needs) = (fault.kind(), fault.needs());
            let (why, fix) = if needs.net && !self.partitions {
                (
                    format!("{loopback}: iptables cannot single out one node's links"),
                    "or run as root with --net netns",
                )
            } else if let Some(why) = self.no_power_loss.as_ref().filter(|_| needs.fuse) {
                (why.clone(), "")
            } else if let Some(why) = self.no_clock.as_ref().filter(|_| needs.clock) {
                (
                    why.clone(),
                    "or, on throwaway VMs, use --ssh --real-clock-skew",
                )
            } else {
                continue;
            };
            limits.push(Limit {
                label: kind.name(),
                needs: Box::new(move |f| f.kind == kind),
                why,
                fix: format!("drop the {} faults {fix}", kind.name())
                    .trim_end()
                    .to_string(),
            });
        }
        if let Some(why) = &self.no_local_packets {
            limits.push(Limit {
                label: "packet delay/duplicate/reorder/bandwidth",
                needs: Box::new(|f| f.packet.is_some_and(|m| m.needs_local_netns())),
                why: why.clone(),
                fix: "use mode = \"loss\" (an iptables rule) or drop those packet faults (docs/faults.md)".into(),
            });
        }
        if let Some(why) = &self.no_snapshot_file {
            limits.push(Limit {
                label: "snapshot corruption",
                needs: Box::new(|f| f.file.as_deref() == Some("snapshot")),
                why: why.clone(),
                fix: "use file = \"txnlog\", \"acceptedEpoch\" or \"currentEpoch\", or --target zookeeper".into(),
            });
        }
        limits
    }
}

/// The schedule to run and what the default left out of it (recorded in test.json).
#[derive(Debug, Clone)]
pub struct Chosen {
    pub schedule: Schedule,
    /// One line per kind the default `mixed` dropped, naming why ("power-loss: ...").
    pub left_out: Vec<String>,
}

/// The mean gap of `--nemesis KIND,..` when `--nemesis-interval` is not given.
pub const KINDS_INTERVAL: Duration = Duration::from_secs(10);

/// The schedule a run's flags ask for: `--nemesis-file` (a path or a built-in name) wins, then
/// `--nemesis KIND,..` (each fault lasting `interval`, with `interval` of quiet between;
/// [`KINDS_INTERVAL`] when not given), else the built-in `mixed`. A seeded schedule's own
/// `interval` gives way to `interval` when one is given; a timed one has none to replace.
/// What the machines cannot do (`abilities`) is an error in an explicit schedule; the default
/// `mixed` leaves it out instead (with every composed entry that has such a part) and says so
/// in `left_out`, so a run never silently tests less than it says.
pub fn schedule_from_flags(
    kinds: Option<&str>,
    file: Option<&Path>,
    interval: Option<Duration>,
    abilities: &Abilities,
) -> Result<Chosen> {
    let explicit = kinds.is_some() || file.is_some();
    let mut schedule = match (file, kinds) {
        (Some(f), _) => catalogue::load(&f.to_string_lossy())?,
        (None, Some(k)) => {
            let gap = interval.unwrap_or(KINDS_INTERVAL);
            Schedule::from_flags(k, gap, gap)?
        }
        (None, None) => catalogue::load("mixed")?,
    };
    let from_kinds = file.is_none() && kinds.is_some();
    if let Some(gap) = interval.filter(|_| !from_kinds) {
        if schedule.timed.is_some() {
            return Err(bad_input(format!(
                "--nemesis-interval with the timed schedule {}: each [[step]] has its own `at`; \
                 drop --nemesis-interval",
                schedule.origin
            )));
        }
        schedule.interval = gap;
    }
    if explicit {
        let limits = abilities.limits();
        if let Some(limit) = limits
            .iter()
            .find(|l| schedule.faults.iter().any(|f| l.hits(f)))
        {
            return Err(bad_input(format!(
                "{} faults cannot run: {}; {}",
                limit.label, limit.why, limit.fix
            )));
        }
    }
    let left_out = leave_out_unable(&mut schedule, abilities);
    Ok(Chosen { schedule, left_out })
}

/// Drops from `schedule` every fault that `abilities` rules out, composed entries with such a
/// part included; one line per limit that dropped something ("power-loss: why"), for
/// `left_out`.
pub fn leave_out_unable(schedule: &mut Schedule, abilities: &Abilities) -> Vec<String> {
    let mut lines = Vec::new();
    for limit in abilities.limits() {
        let before = schedule.faults.len();
        schedule.faults.retain(|f| !limit.hits(f));
        if schedule.faults.len() < before {
            lines.push(format!("{}: {}", limit.label, limit.why));
        }
    }
    lines
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
        std::sync::Arc::new(live::ScheduledNemesis::new(schedule))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule::FaultKind;

    fn able() -> Abilities {
        Abilities {
            partitions: true,
            ..Abilities::default()
        }
    }

    #[test]
    fn the_default_mixed_has_power_loss_where_it_can_run_and_leaves_it_out_saying_why() {
        let full = schedule_from_flags(None, None, None, &able()).unwrap();
        assert!(full.schedule.kinds().contains(&FaultKind::PowerLoss));
        assert!(full.left_out.is_empty(), "{:?}", full.left_out);
        let no_fuse = Abilities {
            no_power_loss: Some("no /dev/fuse".into()),
            ..able()
        };
        let chosen = schedule_from_flags(None, None, None, &no_fuse).unwrap();
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
        let loopback = Abilities::default();
        let chosen = schedule_from_flags(None, None, None, &loopback).unwrap();
        assert!(chosen.left_out.iter().any(|l| l.starts_with("partition:")));
        assert!(!chosen.schedule.kinds().contains(&FaultKind::Partition));
    }

    #[test]
    fn over_ssh_the_default_mixed_leaves_out_every_entry_with_a_local_packet_part() {
        // stale-joiners is a kill whose composed parts slow two followers' links (the engine):
        // judging main faults only kept it, and its delay failed on the remote hosts.
        let ssh = Abilities {
            no_local_packets: Some("--ssh (local namespaces only)".into()),
            ..able()
        };
        let full = schedule_from_flags(None, None, None, &able()).unwrap();
        let chosen = schedule_from_flags(None, None, None, &ssh).unwrap();
        let groups = |c: &Chosen| -> Vec<Option<String>> {
            c.schedule.faults.iter().map(|f| f.group_name()).collect()
        };
        assert!(groups(&full).contains(&Some("stale-joiners".into())));
        assert!(!groups(&chosen).contains(&Some("stale-joiners".into())));
        let local = |f: &schedule::FaultTemplate| f.packet.is_some_and(|m| m.needs_local_netns());
        for f in &chosen.schedule.faults {
            assert!(!local(f) && !f.with.iter().any(local), "{f:?}");
        }
        // Packet loss (an iptables rule) still runs over SSH.
        assert!(chosen.schedule.kinds().contains(&FaultKind::Packet));
        assert_eq!(
            chosen.left_out,
            vec!["packet delay/duplicate/reorder/bandwidth: --ssh (local namespaces only)"]
        );
        let err = schedule_from_flags(None, Some(Path::new("stale-joiners")), None, &ssh)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("packet delay/duplicate/reorder/bandwidth faults cannot run: --ssh")
                && err.contains("mode = \"loss\"")
                && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn an_explicit_power_loss_where_it_cannot_run_is_one_clear_line() {
        let no_fuse = Abilities {
            no_power_loss: Some("--target zookeeper (lazyfs ...)".into()),
            ..able()
        };
        let err =
            schedule_from_flags(None, Some(Path::new("power-loss")), None, &no_fuse).unwrap_err();
        let line = format!("{err:#}");
        assert!(
            line.starts_with("power-loss faults cannot run: --target zookeeper"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(crate::exit::code_for(&err), 254);
    }
}
