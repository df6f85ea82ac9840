//! epoch-monotonic: each node's epochs (currentEpoch and acceptedEpoch) never decrease, across
//! restarts too (a restarted node reads them back from disk; a replaced one, started on a wiped
//! data dir, begins again from its fresh start); and each new leader's epoch
//! exceeds every epoch established before it.
//!
//! "Before" must survive sampling: a leader's first read in an epoch only bounds when it took
//! the epoch from above. Its previous read (taken before it led) bounds it from below, so only
//! epochs seen in reads older than that previous read, minus the read slack, were certainly
//! established earlier. A leader whose very first read already shows it leading is not judged
//! on this rule.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, Rec, Status};
use super::CheckOptions;
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "epoch-monotonic";

pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let n = d.nodes.len();
    let mut last: Vec<Option<Status>> = vec![None; n];
    let mut reported = vec![false; n];
    let mut reported_order = vec![false; n];
    // Steps of the running maximum of every epoch seen: (time, max, pos of the read).
    let mut max_steps: Vec<(u64, u64, u32)> = Vec::new();
    let mut violations: Vec<Item> = Vec::new();
    let mut new_leaders = 0u64;
    let slack = opts.read_slack_ns();

    for rec in d.records() {
        // A replaced server starts from nothing: its epochs are judged from there.
        for node in d.started_afresh(rec) {
            last[node as usize] = None;
        }
        let Rec::Status(s) = rec else { continue };
        let name = d.name(s.node);
        if s.accepted_epoch < s.peer_epoch && !reported_order[s.node as usize] {
            reported_order[s.node as usize] = true;
            violations.push((
                format!(
                    "{name} reported acceptedEpoch {} below its currentEpoch {}: an epoch is accepted before it becomes current.",
                    s.accepted_epoch, s.peer_epoch
                ),
                vec![EvRef::new(
                    s.pos,
                    format!("{name} acceptedEpoch {} < currentEpoch {}", s.accepted_epoch, s.peer_epoch),
                )],
            ));
        }
        if let Some(prev) = last[s.node as usize] {
            let back = |what: &str, before: u64, now: u64| -> Item {
                (
                    format!("{name}'s {what} went back from {before} to {now}."),
                    vec![
                        EvRef::new(prev.pos, format!("{name} {what} {before}")),
                        EvRef::new(s.pos, format!("{name} {what} {now}")),
                    ],
                )
            };
            if !reported[s.node as usize] {
                if s.peer_epoch < prev.peer_epoch {
                    violations.push(back("currentEpoch", prev.peer_epoch, s.peer_epoch));
                    reported[s.node as usize] = true;
                } else if s.accepted_epoch < prev.accepted_epoch {
                    violations.push(back("acceptedEpoch", prev.accepted_epoch, s.accepted_epoch));
                    reported[s.node as usize] = true;
                }
            }
            if let Some(e) = s.leads() {
                if prev.leads() != Some(e) {
                    new_leaders += 1;
                    let bound = prev.time.saturating_sub(slack);
                    let before = max_steps.partition_point(|step| step.0 < bound);
                    if before > 0 {
                        let (_, max, pos) = max_steps[before - 1];
                        if max >= e {
                            violations.push((
                                format!("{name} took the lead in epoch {e}, but epoch {max} had been established before."),
                                vec![
                                    EvRef::new(pos, format!("epoch {max} established")),
                                    EvRef::new(prev.pos, format!("{name} not yet leading epoch {e}")),
                                    EvRef::new(s.pos, format!("{name} LEADING epoch {e}")),
                                ],
                            ));
                        }
                    }
                }
            }
        }
        if max_steps.last().is_none_or(|m| s.peer_epoch > m.1) {
            // Times may step back a little between concurrently appended lines; a step dated
            // no earlier than the one before keeps the search sorted and errs towards "later".
            let t = max_steps.last().map_or(s.time, |m| m.0.max(s.time));
            max_steps.push((t, s.peer_epoch, s.pos));
        }
        last[s.node as usize] = Some(*s);
    }

    let gaps = never_read(d, info);
    let finals: Vec<NodeEpochs> = last
        .iter()
        .flatten()
        .map(|s| NodeEpochs {
            node: d.name(s.node).to_string(),
            current_epoch: s.peer_epoch,
            accepted_epoch: s.accepted_epoch,
        })
        .collect();
    let ok = format!(
        "No node's currentEpoch or acceptedEpoch ever went back, no read showed acceptedEpoch below currentEpoch, and each of the {new_leaders} leaderships seen began in an epoch above every epoch established before it."
    );
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::EpochMonotonic(
        EpochMonotonicMeasurements {
            new_leaderships: new_leaders,
            last_epochs: finals,
        },
    ))
}

/// A gap for each node of the test that no read answered: its epochs are unknown.
fn never_read(d: &Digest, info: &TestInfo) -> Vec<Item> {
    let unread = |name: &&String| {
        let ix = d.nodes.iter().position(|x| x == *name);
        ix.is_none_or(|i| d.reads[i] == 0)
    };
    (info.nodes.iter().filter(unread))
        .map(|name| {
            (
                format!("{name} was never read: its epochs are unknown."),
                vec![],
            )
        })
        .collect()
}

/// What epoch-monotonic measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMonotonicMeasurements {
    pub new_leaderships: u64,
    /// Each node's epochs at its last read.
    pub last_epochs: Vec<NodeEpochs>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEpochs {
    pub node: String,
    pub current_epoch: u64,
    pub accepted_epoch: u64,
}
