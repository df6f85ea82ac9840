//! vote-rule: for each election a node reports deciding (`last_election`), the decided leader
//! beats or equals every vote it counted, in ZooKeeper's total order (peerEpoch, zxid, sid),
//! and the votes for the decided leader come from a quorum of distinct servers.
//!
//! Why "every counted vote": FLE adopts any better vote of its round as its proposal, so a
//! decided proposal that some counted vote beats was decided without looking at it. The
//! decided leader's own rank is (decided peer_epoch, decided zxid, leader sid): what it was
//! elected with. Each distinct summary a node reports is judged once.

use super::finding::{EvRef, Finding, Item};
use super::model::Digest;
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub const NAME: &str = "vote-rule";

pub fn check(d: &Digest, info: &TestInfo) -> Finding {
    let quorum = info.quorum();
    let mut violations: Vec<Item> = Vec::new();
    for el in &d.elections {
        let s = &el.summary;
        let name = d.name(el.node);
        let decided = (s.peer_epoch, s.zxid, s.leader);
        let at = |why: String| vec![EvRef::new(el.pos, why)];
        if let Some(v) = s
            .votes
            .iter()
            .find(|v| (v.peer_epoch, v.zxid, v.leader) > decided)
        {
            violations.push((
                format!(
                    "{name} decided n{} (peerEpoch {}, zxid {:#x}) in round {} although it counted n{}'s vote for n{} (peerEpoch {}, zxid {:#x}), which beats it.",
                    s.leader, s.peer_epoch, s.zxid, s.round, v.sid, v.leader, v.peer_epoch, v.zxid
                ),
                at(format!("{name}'s election of round {}", s.round)),
            ));
            continue;
        }
        let backers: BTreeSet<u64> = s
            .votes
            .iter()
            .filter(|v| v.leader == s.leader)
            .map(|v| v.sid)
            .collect();
        if backers.len() < quorum {
            violations.push((
                format!(
                    "{name} decided n{} in round {} with the votes of {} server(s) {:?}, short of a quorum of {quorum}.",
                    s.leader, s.round, backers.len(), backers
                ),
                at(format!("{name}'s election of round {}", s.round)),
            ));
        }
    }
    let mut gaps: Vec<Item> = Vec::new();
    if d.elections.is_empty() {
        let why = if d.reads.iter().sum::<u64>() == 0 {
            "No node was ever read, so no election can be judged."
        } else {
            "No status read carried a decided election (`last_election`): this target does not expose the votes it counted, so the rule cannot be judged."
        };
        gaps.push((why.to_string(), vec![]));
    }
    let ok = format!(
        "Each of the {} elections reported was decided for a leader that beats or equals every vote counted, backed by a quorum ({quorum}) of votes.",
        d.elections.len()
    );
    let took: Vec<u64> = d.elections.iter().map(|e| e.summary.took_ms).collect();
    let m = VoteRuleMeasurements {
        elections_judged: d.elections.len(),
        election_took_ms_max: took.iter().max().copied(),
        election_took_ms_mean: (!took.is_empty())
            .then(|| took.iter().sum::<u64>() as f64 / took.len() as f64),
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::VoteRule(m))
}

/// What vote-rule measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoteRuleMeasurements {
    pub elections_judged: usize,
    pub election_took_ms_max: Option<u64>,
    pub election_took_ms_mean: Option<f64>,
}
