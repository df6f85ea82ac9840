//! Which per-fault recovery times the report shows: the recovery checker's typed measurements
//! when results.json has them, otherwise the same facts computed from the history by the same
//! function (`history::view`, which the checker also uses). Either way a fault's time is the
//! time from its start to the first quorum-backed leader read after it, so the plot, the table
//! and the checker agree.

use crate::checker::Results;
use crate::history::view::FaultRecovery;

/// Where the recovery times came from, for the plot's note and the table's caption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoverySource {
    /// results.json's recovery checker measurements.
    Checker,
    /// `history::view` over this history: no results.json, or no recovery measurements in it.
    History,
}

/// The recovery times to show: the checker's, else `from_history`.
pub fn choose(
    results: Option<&Results>,
    from_history: &[FaultRecovery],
) -> (Vec<FaultRecovery>, RecoverySource) {
    let measured = results.and_then(|r| r.checkers.iter().find_map(|c| c.recovery()));
    match measured {
        Some(m) => (m.faults.clone(), RecoverySource::Checker),
        None => (from_history.to_vec(), RecoverySource::History),
    }
}

/// Seconds from a fault to a quorum-backed leader, None when none was observed.
pub fn seconds(r: &FaultRecovery) -> Option<f64> {
    r.ms_to_quorum_leader.map(|ms| ms as f64 / 1e3)
}

/// The note under the recovery plot.
pub fn note(source: RecoverySource, count: usize) -> String {
    match (source, count) {
        (_, 0) => "no faults took effect in this run".into(),
        (RecoverySource::Checker, _) => "from the recovery checker".into(),
        (RecoverySource::History, _) => {
            "computed from the history by the recovery checker's definition".into()
        }
    }
}
