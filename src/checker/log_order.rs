//! log-order (writes workload): every final log is strictly increasing in zxid (so no zxid
//! appears twice), and no entry's epoch is above the epochs established: a log entry of epoch
//! e was proposed by the leader of e, which must have existed.
//!
//! "Established" is read from status reads: the highest currentEpoch or acceptedEpoch any read
//! showed. Final logs are read after the last status reads, so one more election may have
//! happened unseen in between: an entry one epoch above the highest seen is unknown, two or
//! more above is invalid (one unseen election adds one epoch).
//!
//! What it cannot see: entries of a log that could not be read; an order broken only in the
//! committed-but-not-logged state a final log does not show. Whether each log holds what it
//! should is durability's and leader-completeness's question.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, Rec};
use crate::history::test_info::TestInfo;

pub const NAME: &str = "log-order";

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let mut max_epoch = 0u64;
    let mut logs = Vec::new();
    for r in d.records() {
        match r {
            Rec::Status(s) => max_epoch = max_epoch.max(s.peer_epoch).max(s.accepted_epoch),
            Rec::FinalLog(l) => logs.push(l),
            _ => {}
        }
    }
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let mut readable = 0usize;
    let mut entries_total = 0usize;
    for l in &logs {
        let Ok(entries) = &l.entries else { continue };
        readable += 1;
        entries_total += entries.len();
        let name = d.name(l.node);
        let at = |i: usize, why: String| vec![EvRef::new(l.pos, why).at_entry(i)];
        if let Some(i) = (1..entries.len()).find(|&i| entries[i].0 <= entries[i - 1].0) {
            let (a, b) = (entries[i - 1].0, entries[i].0);
            let what = if a == b { "twice" } else { "out of order" };
            violations.push((
                format!("{name}'s final log holds zxid {a:#x} then {b:#x} at entries {} and {i} ({what}): a log must be strictly increasing in zxid.", i - 1),
                at(i, format!("{name} final log")),
            ));
        }
        if let Some(i) = entries.iter().position(|e| e.0 >> 32 > max_epoch) {
            let (z, e) = (entries[i].0, entries[i].0 >> 32);
            let text = format!("{name}'s final log holds zxid {z:#x} of epoch {e}, above every epoch any read showed established (highest {max_epoch})");
            if e > max_epoch + 1 {
                violations.push((
                    format!("{text}: no leader of epoch {e} ever existed."),
                    at(i, format!("{name} final log")),
                ));
            } else {
                gaps.push((
                    format!("{text}; an election after the last read may have established it."),
                    at(i, format!("{name} final log")),
                ));
            }
        }
    }
    if readable == 0 {
        let why = if logs.is_empty() {
            format!(
                "No final log was read (workload \"{}\"), so log order cannot be judged.",
                info.workload
            )
        } else {
            "No final log could be read, so log order cannot be judged.".to_string()
        };
        gaps.push((why, vec![]));
    } else if entries_total == 0 {
        gaps.push((
            format!(
                "Every final log read ({readable}) is empty, so log order had nothing to judge."
            ),
            vec![],
        ));
    }
    let ok = format!(
        "Each of the {readable} readable final logs ({entries_total} entries) is strictly increasing in zxid, with no epoch above the highest established ({max_epoch})."
    );
    Finding::judge(violations, gaps, ok)
}
