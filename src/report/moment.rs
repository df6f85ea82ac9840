//! Moments: what `history::view` said at a given history event (who claimed to lead which
//! epoch, the quorum-backed leader, the faults in force and who was cut off from whom), taken
//! during the report's one pass at each evidence event, and the changes of the quorum-backed
//! leader over the run. The account paragraphs are written from these; the report never
//! decides leadership or fault intervals itself.

use crate::history::view::{FaultInterval, LeaderClaim, View};
use std::collections::BTreeMap;

/// The view right after the event with history index `index` was fed.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    pub index: u64,
    /// 1-based line number of the event in history.jsonl.
    pub line_no: u64,
    pub time_ns: u64,
    /// Nodes whose latest read claims to lead an established epoch.
    pub claims: Vec<LeaderClaim>,
    /// The quorum-backed leader (node, epoch), if any.
    pub quorum_leader: Option<(String, u64)>,
    /// Faults in force.
    pub faults: Vec<FaultInterval>,
    /// For each node cut off by the partition in force: the nodes it cannot talk to.
    pub cut: BTreeMap<String, Vec<String>>,
}

impl Moment {
    pub fn of(view: &View, index: u64, line_no: u64, time_ns: u64) -> Self {
        let nodes = view.nodes();
        let mut cut = BTreeMap::new();
        for a in 0..nodes.len() {
            let from: Vec<String> = (0..nodes.len())
                .filter(|&b| b != a && view.cut(a, b))
                .map(|b| nodes[b].name.clone())
                .collect();
            if !from.is_empty() {
                cut.insert(nodes[a].name.clone(), from);
            }
        }
        Moment {
            index,
            line_no,
            time_ns,
            claims: view.claims(),
            quorum_leader: quorum_leader(view),
            faults: view.active_faults().cloned().collect(),
            cut,
        }
    }
}

/// The quorum-backed leader now (`View::quorum_leader`, the one definition), by name.
pub fn quorum_leader(view: &View) -> Option<(String, u64)> {
    let l = view.quorum_leader(0)?;
    Some((view.nodes()[l.node].name.clone(), l.epoch))
}

/// From `time_ns` on, `leader` (None: nobody) was the quorum-backed leader.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderChange {
    pub time_ns: u64,
    pub index: u64,
    pub leader: Option<(String, u64)>,
}
