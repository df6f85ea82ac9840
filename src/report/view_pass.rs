//! What the report asks the view: fault intervals and recovery times, every change of the
//! quorum-backed leader, and what held at each evidence event (`moment`). All of it comes
//! from one feed of the checkers' digest, in memory, through the recovery checker's own
//! `view_with`: the plot, the tables and the checkers cannot disagree, and the history file
//! is not read a second time. (A separate feed rather than the checkers' own: which events
//! are evidence is known only once they have judged.)

use super::lane::LaneState;
use super::moment::{self, LeaderChange, Moment};
use super::places::Places;
use crate::api::ZabPhase;
use crate::checker::model::Rec;
use crate::checker::recovery::view_with;
use crate::checker::LoadedRun;
use crate::history::view::{FaultInterval, FaultRecovery};
use std::collections::{BTreeMap, BTreeSet};

/// The view's answers the report draws.
#[derive(Debug, Default)]
pub struct Viewed {
    pub faults: Vec<FaultInterval>,
    pub recoveries: Vec<FaultRecovery>,
    /// The view at each wanted event, by history index.
    pub moments: BTreeMap<u64, Moment>,
    pub leader_changes: Vec<LeaderChange>,
}

/// What a lane shows after a record, for telling when the quorum-backed leader may change.
type LaneKey = (LaneState, Option<u64>, u64, Option<ZabPhase>);

/// Feeds the run's digest to a view, taking a moment at each event whose history index is
/// in `wanted` (`places` turns positions into indices and line numbers).
pub fn of(run: &LoadedRun, places: &Places, wanted: &BTreeSet<u64>) -> Viewed {
    let mut moments = BTreeMap::new();
    let mut leader_changes: Vec<LeaderChange> = Vec::new();
    let mut lanes: BTreeMap<usize, LaneKey> = BTreeMap::new();
    let finished = view_with(
        &run.digest,
        &run.info,
        |_, _, _| {},
        |view, rec, node| {
            let (pos, time) = rec.at();
            let index = places.index(pos);
            // The quorum-backed leader can only change when a lane or a fault does: asked then.
            let changed = match (rec, node) {
                (Rec::Status(s), Some(ix)) => {
                    let key = (s.state.into(), s.leader, s.peer_epoch, Some(s.phase));
                    lanes.insert(ix, key) != Some(key)
                }
                (Rec::Unreachable { .. }, Some(ix)) => {
                    let key = (LaneState::Down, None, 0, None);
                    lanes.insert(ix, key) != Some(key)
                }
                (Rec::Nemesis(_), _) => true,
                _ => false,
            };
            if changed {
                let now = moment::quorum_leader(view);
                if leader_changes.last().map(|c| &c.leader) != Some(&now) {
                    leader_changes.push(LeaderChange {
                        time_ns: time,
                        index,
                        leader: now,
                    });
                }
            }
            if wanted.contains(&index) {
                let m = Moment::of(view, index, places.line_no(pos), time);
                moments.insert(index, m);
            }
        },
    );
    Viewed {
        faults: finished.intervals,
        recoveries: finished.recoveries,
        moments,
        leader_changes,
    }
}
