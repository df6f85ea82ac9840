//! observers: the non-voting servers (test.json `observers`, from `--observers`) stay what
//! they are, as ZooKeeper's `validVoter` and learner types make them:
//! - an observer is never read LEADING or FOLLOWING (it LOOKs or OBSERVEs);
//! - no decided election counted an observer's vote (a quorum counts voters only);
//! - each observer's final log is a prefix of the longest voter's final log: it holds no txn
//!   the voters did not commit, none out of order (it may lag: its log is read as it stands);
//! - every zxid an observer reported as its last committed one is in that voter log: an
//!   observer told of a txn no quorum committed serves it until its next sync truncates it,
//!   which its final log no longer shows. Not for ZooKeeper, whose final logs (the workload's
//!   znodes) leave out txns it commits (sessions, the parent znode).
//!
//! An observer a reconfig promoted (`role = "participant"`) is a voter while the config it
//! reports lists it as one: its FOLLOWING or LEADING reads (and, demoted back, those within a
//! leader's Zab timeout of its last read as a voter, `leader_stepdown::broadcast_bound_ns`),
//! and elections whose deciding server's config lists it, are no violation.
//!
//! That every observer rejoins the final leader after the heal is judged by `recovery`, whose
//! settled cluster counts an observer OBSERVING the leader as rejoined. A run without
//! observers is `n/a`.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, FinalLog, NodeIx, Rec};
use crate::api::ServerState;
use crate::history::sid_of;
use crate::history::test_info::TestInfo;

pub const NAME: &str = "observers";

/// A node's reported last committed zxid: (node, zxid, position, time of its first read).
type Committed = (NodeIx, u64, u32, u64);

/// The longest voter final log and its entries: the reference an observer's log is held to.
type Longest<'a> = (&'a FinalLog, &'a [(u64, String)]);

/// Judges the observers: their reads, the elections' votes, their final logs and the zxids
/// they reported committed, each against what only voters may do.
pub fn check(d: &Digest, info: &TestInfo, opts: &super::CheckOptions) -> Finding {
    if info.observers.is_empty() {
        // Nothing can break these rules (and the registry marks the checker n/a).
        let none = "The ensemble has no observers: nothing to judge.";
        return Finding::judge(Vec::new(), Vec::new(), none.into());
    }
    let is_observer = |node: NodeIx| info.observers.iter().any(|o| o == d.name(node));
    let observer_sids: Vec<u64> = info.observers.iter().filter_map(|o| sid_of(o)).collect();
    let mut violations: Vec<Item> = Vec::new();
    let mut logs: Vec<&FinalLog> = Vec::new();
    // Each observer's distinct reported last committed zxids, with the first read of each.
    let mut committed: Vec<Committed> = Vec::new();
    let hand_over = super::leader_stepdown::broadcast_bound_ns(info, opts);
    let (observer_reads, as_voter) = read_pass(
        d,
        (&is_observer, hand_over),
        &mut logs,
        &mut committed,
        &mut violations,
    );
    counted_observer_votes(d, &observer_sids, &mut violations);
    let voter_logs = logs.iter().filter(|l| !is_observer(l.node));
    let longest: Option<Longest> = voter_logs
        .filter_map(|l| Some((*l, l.entries.as_deref().ok()?)))
        .max_by_key(|(_, e)| e.len());
    let mut compared = 0;
    if let Some(longest) = longest {
        let observer_logs = logs.iter().copied().filter(|l| is_observer(l.node));
        compared = not_prefixes(d, observer_logs, longest, &mut violations);
    }
    // ZooKeeper logs txns the final logs leave out (sessions, the workload's parent znode),
    // so there a committed zxid missing from them proves nothing.
    let every_txn_logged = info.target != "zookeeper";
    if let Some(longest) = longest.filter(|_| every_txn_logged) {
        committed_unlogged(d, &committed, longest, &mut violations);
    }
    let mut gaps: Vec<Item> = Vec::new();
    if observer_reads == 0 {
        gaps.push((
            "No observer was ever read, so none can be judged.".into(),
            vec![],
        ));
    }
    let ok = format!(
        "The {} observers ({}) were never read LEADING or FOLLOWING in {} reads{}, no election of {} counted an observer's vote, and {compared} observer final logs are prefixes of the voters' longest.",
        info.observers.len(),
        info.observers.join(", "),
        observer_reads - as_voter,
        promoted_words(as_voter),
        d.elections.len()
    );
    Finding::judge(violations, gaps, ok)
}

/// One pass over the records: a violation for each observer first read LEADING or
/// FOLLOWING; gathers the final logs and each observer's reported committed zxids. Returns
/// how many observer reads there were, and how many of them were LEADING or FOLLOWING as a
/// promoted voter's.
fn read_pass<'a>(
    d: &'a Digest,
    (is_observer, hand_over): (&impl Fn(NodeIx) -> bool, u64),
    logs: &mut Vec<&'a FinalLog>,
    committed: &mut Vec<Committed>,
    violations: &mut Vec<Item>,
) -> (u64, u64) {
    let mut claimed = vec![false; d.nodes.len()];
    let mut as_voter = 0u64;
    // Per observer: the time of its last read whose config listed it as a voter (promoted).
    let mut voter_at: Vec<Option<u64>> = vec![None; d.nodes.len()];
    let mut observer_reads = 0u64;
    let mut last_committed = vec![0u64; d.nodes.len()];
    for r in d.records() {
        match r {
            Rec::Status(s) if is_observer(s.node) => {
                observer_reads += 1;
                let z = s.last_committed_zxid;
                let changed = std::mem::replace(&mut last_committed[s.node as usize], z) != z;
                // A zxid of counter 0 is an epoch's start (NEWLEADER), never a txn: ZooKeeper's
                // reads report it for a server synced with nothing written since.
                if changed && crate::api::counter_of(z) > 0 {
                    committed.push((s.node, z, s.pos, s.time));
                }
                let voting = matches!(s.state, ServerState::Leading | ServerState::Following);
                // Promoted: the config it reports lists it as a voter (a reconfig's
                // `role = "participant"`), and a voter follows and leads. Demoted back while
                // it led, it has a leader's Zab timeout to hand over, as `membership` gives a
                // leader outside its config.
                let at = &mut voter_at[s.node as usize];
                if promoted(d, s.node, s.pos) {
                    *at = Some(s.time);
                }
                if voting && at.is_some_and(|t| s.time <= t + hand_over) {
                    as_voter += 1;
                    continue;
                }
                if voting && !std::mem::replace(&mut claimed[s.node as usize], true) {
                    let word = if s.state == ServerState::Leading {
                        "LEADING"
                    } else {
                        "FOLLOWING"
                    };
                    violations.push((
                        format!(
                            "Observer {} was read {word} at {}: an observer only OBSERVEs (or LOOKs).",
                            d.name(s.node),
                            crate::duration::moment(s.time)
                        ),
                        vec![EvRef::new(s.pos, format!("{} {word}", d.name(s.node)))],
                    ));
                }
            }
            Rec::FinalLog(l) => logs.push(l),
            _ => {}
        }
    }
    (observer_reads, as_voter)
}

/// The words for the reads of promoted observers in the verdict ("" when there were none).
fn promoted_words(as_voter: u64) -> String {
    match as_voter {
        0 => String::new(),
        n => format!(
            " as observers (in another {n} they were voters, promoted by a reconfig, or handing \
             over after it)"
        ),
    }
}

/// Whether the config `node` reported by the read at `pos` lists it as a voter: an observer
/// of test.json promoted by a reconfig.
fn promoted(d: &Digest, node: NodeIx, pos: u32) -> bool {
    let [_, config] = d.configs_around(node, pos);
    (config.zip(d.sid(node))).is_some_and(|(c, sid)| c.voters.contains(&sid))
}

/// A violation for each decided election that counted an observer's vote (one its deciding
/// server's config listed as a voter, promoted, counts).
fn counted_observer_votes(d: &Digest, observer_sids: &[u64], violations: &mut Vec<Item>) {
    for el in &d.elections {
        let [_, config] = d.configs_around(el.node, el.pos);
        let voter = |s: &u64| config.is_some_and(|c| c.voters.contains(s));
        let counted: Vec<u64> = el
            .summary
            .votes
            .iter()
            .map(|v| v.sid)
            .filter(|s| observer_sids.contains(s) && !voter(s))
            .collect();
        if let Some(o) = counted.first() {
            violations.push((
                format!(
                    "{}'s election of round {} (leader n{}) counted the vote of observer n{o}: a quorum counts voters only.",
                    d.name(el.node),
                    el.summary.round,
                    el.summary.leader
                ),
                vec![EvRef::new(el.pos, format!("{}'s decided election", d.name(el.node)))],
            ));
        }
    }
}

/// A violation for each observer final log that is not a prefix of the longest voter log;
/// returns how many were compared.
fn not_prefixes<'a>(
    d: &Digest,
    observer_logs: impl Iterator<Item = &'a FinalLog>,
    (leader_log, reference): Longest,
    violations: &mut Vec<Item>,
) -> usize {
    let mut compared = 0;
    for l in observer_logs {
        let Ok(entries) = &l.entries else { continue };
        compared += 1;
        let bad = entries
            .iter()
            .enumerate()
            .find(|(i, e)| reference.get(*i) != Some(e));
        if let Some((i, (zxid, value))) = bad {
            let theirs = match reference.get(i) {
                Some((z, v)) => format!("{z:#x} = {v}"),
                None => "nothing (it ends before)".into(),
            };
            violations.push((
                format!(
                    "Observer {}'s final log holds {zxid:#x} = {value} at entry {i}, where {} (the longest voter log) holds {theirs}: an observer's log must be a prefix of what the voters committed.",
                    d.name(l.node),
                    d.name(leader_log.node)
                ),
                vec![
                    EvRef::new(l.pos, format!("{}'s final log", d.name(l.node))).at_entry(i),
                    EvRef::new(leader_log.pos, format!("{}'s final log", d.name(leader_log.node)))
                        .at_entry(i.min(reference.len().saturating_sub(1))),
                ],
            ));
        }
    }
    compared
}

/// A violation for each observer first told of a committed zxid no voter's final log holds.
fn committed_unlogged(
    d: &Digest,
    committed: &[Committed],
    (leader_log, reference): Longest,
    violations: &mut Vec<Item>,
) {
    let mut told = vec![false; d.nodes.len()];
    let held: std::collections::HashSet<u64> = reference.iter().map(|e| e.0).collect();
    for &(node, z, pos, time) in committed {
        let known = held.contains(&z);
        if known || std::mem::replace(&mut told[node as usize], true) {
            continue;
        }
        violations.push((
            format!(
                "Observer {} reported {z:#x} committed at {}, but no voter's final log holds it ({} has the longest): an observer was told of a txn no quorum committed.",
                d.name(node),
                crate::duration::moment(time),
                d.name(leader_log.node)
            ),
            vec![
                EvRef::new(pos, format!("{} committed {z:#x}", d.name(node))),
                EvRef::new(leader_log.pos, format!("{}'s final log", d.name(leader_log.node))),
            ],
        ));
    }
}
