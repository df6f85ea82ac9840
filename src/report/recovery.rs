//! The per-fault recovery times as the report words them. The times themselves are the
//! recovery checker's: `view_pass` feeds the checkers' digest through its `view_with`, so a
//! fault's time (from its start to the first quorum-backed leader read after it) is the same
//! in the plot, the table and results.json.

use crate::history::view::FaultRecovery;

/// Seconds from a fault to a quorum-backed leader, None when none was observed.
pub fn seconds(r: &FaultRecovery) -> Option<f64> {
    r.ms_to_quorum_leader.map(|ms| ms as f64 / 1e3)
}

/// The note under the recovery plot.
pub fn note(count: usize) -> String {
    match count {
        0 => "no faults took effect in this run".into(),
        _ => "by the recovery checker's definition, over the history it judged".into(),
    }
}
