//! leader-completeness (writes workload): every write acknowledged before a leader's epoch
//! began is in that leader's history. This is Zab's leader-completeness property, the heart of
//! the ZOOKEEPER-1419/1154/3911 class of bugs: FLE must elect a server whose log holds every
//! committed transaction, because a ZooKeeper leader never fetches missing ones from followers.
//!
//! For each leadership seen (a node's first read LEADING an established epoch e after a read of
//! it that did not), the writes that certainly committed before it began are those acknowledged
//! (with a zxid of an epoch below e) earlier than that previous read minus the read slack:
//! the previous read's snapshot shows the node not yet leading e, and an acknowledgement follows
//! its commit. Where a fault ended the leadership before it (the view's last reign of a lower
//! epoch seen before it, which a kill, pause or cut left without its quorum: `view::Reign`),
//! that fault's invoke is the bound when it is later: a write acknowledged before it was
//! committed before that leadership ended, so before this one began (ack, fault, election: an
//! order the history states exactly, where the reads only say it within the slack). Three
//! things must hold for them:
//! - the leader's last zxid, at its first read leading e, is at least the highest of them (a
//!   leader's log only grows);
//! - the election the leader reported deciding for itself (its `last_election` at that read)
//!   was won with a zxid at least that high (the zxid it voted with is its last logged one);
//!   not judged when it led on FOLLOWING/LEADING notices (a restarted leader rejoining the
//!   ensemble that still follows it: the notices carry that ensemble's older vote), nor when
//!   the leader served another term since that election (ZooKeeper's leader designated by a
//!   reconfig leads the next epoch without one);
//! - its final log holds each of them (a committed write is never truncated), unless a
//!   reconfig's `replace` wiped it since (its final log is a new server's).
//!
//! What it cannot see: a leadership that begins and ends between two reads of its leader, and a
//! leadership whose leader was LEADING already at its very first read (nothing bounds when it
//! began). Writes acknowledged within the read slack of a leadership's start, after the fault
//! that ended the one before (or with no such fault), are not judged against it. It needs client
//! writes (the writes workload) and, for the last point, final logs.

use super::finding::{EvRef, Finding, Item};
use super::fxhash::FastSet;
use super::kind::Kind;
use super::model::{Digest, Rec, Status};
use super::CheckOptions;
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::view::{Ending, Reign};
use crate::history::EventType;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "leader-completeness";

/// An acknowledged write: (ok time, zxid, value, position of the ok).
struct Ack<'a> {
    time: u64,
    zxid: u64,
    value: &'a str,
    pos: u32,
}

/// A node's final log: its history position and its (zxid, value) entries.
type FinalEntries<'a> = (u32, &'a [(u64, String)]);

/// What leader-completeness measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletenessMeasurements {
    /// Leaderships whose start could be bounded, and those with earlier acknowledged writes.
    pub leaderships_judged: usize,
    pub leaderships_with_prior_writes: usize,
    /// Leaderships whose bound was the fault that ended the one before, not a read.
    #[serde(default)]
    pub leaderships_bounded_by_a_fault: usize,
}

/// What one pass over the digest gathers, its accumulators side by side because they are fed
/// from the same records in the same order.
struct Gathered<'a> {
    /// Acknowledged writes with a zxid, in history order.
    acks: Vec<Ack<'a>>,
    /// Write records of any kind.
    writes: usize,
    /// Each node's final log: (position, entries); a set of its values is built only for a
    /// node that led (hashing every log would cost more than the rest of this checker).
    logs: Vec<Option<FinalEntries<'a>>>,
    /// Each leadership seen.
    starts: Vec<Start>,
}

/// A leadership seen: its leader's previous read, its first read leading, and the position of
/// the leader's last read before it that served an established epoch (leading or following).
struct Start {
    prev: Status,
    first: Status,
    served: Option<u32>,
}

/// A leadership with writes acknowledged before it began, and what bounds them.
struct Judged<'a> {
    /// The leader's first read leading the epoch.
    first: &'a Status,
    epoch: u64,
    /// How many of the (time-sorted) acknowledgements came before the bound.
    n: usize,
    /// The highest zxid of an older epoch among them.
    top: &'a Ack<'a>,
    /// The event that bounds them, as evidence.
    not_yet: EvRef,
    /// The bound in words, for the explanation.
    before: String,
    /// The position of the leader's last read serving another term before this one.
    served: Option<u32>,
}

/// Gathers the acknowledged writes, final logs and leaderships in one pass, then judges each
/// leadership (`reigns`: the view's, for the faults that ended leaderships) against the writes
/// acknowledged before it began.
pub fn check(reigns: &[Reign], d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let slack = opts.read_slack_ns();
    let mut g = gather(d);
    if let Some(gap) = super::nothing_acknowledged(NAME, info, g.writes, g.acks.len()) {
        return Finding::judge(vec![], vec![gap], String::new());
    }
    g.acks.sort_by_key(|a| a.time);
    let acks = &g.acks;
    // Running maximum of zxids in acknowledgement order: the top of every prefix at once.
    let mut top_at: Vec<usize> = Vec::with_capacity(acks.len());
    for (i, a) in acks.iter().enumerate() {
        let best = top_at.last().copied().filter(|&b| acks[b].zxid >= a.zxid);
        top_at.push(best.unwrap_or(i));
    }
    // Per node (computed when it first leads): the acknowledgements its final log lacks.
    let mut lacking: Vec<Option<Vec<usize>>> = vec![None; d.nodes.len()];

    let mut violations: Vec<Item> = Vec::new();
    let mut with_prior = 0usize;
    let mut by_fault = 0usize;
    for Start {
        prev,
        first,
        served,
    } in &g.starts
    {
        let e = first.leads().unwrap_or(0);
        let read_bound = prev.time.saturating_sub(slack);
        let ending = ended_before(reigns, e, first.time).filter(|(_, f)| f.at_ns > read_bound);
        let bound = ending.map_or(read_bound, |(_, f)| f.at_ns);
        by_fault += usize::from(ending.is_some());
        let n = acks.partition_point(|a| a.time < bound);
        if n == 0 {
            continue;
        }
        // The highest earlier zxid of an older epoch: the running maximum, unless that is of
        // epoch e or later (itself a violation elsewhere), then a scan.
        let top = match &acks[top_at[n - 1]] {
            a if a.zxid >> 32 < e => Some(a),
            _ => acks[..n]
                .iter()
                .filter(|a| a.zxid >> 32 < e)
                .max_by_key(|a| a.zxid),
        };
        let Some(top) = top else {
            continue;
        };
        with_prior += 1;
        let (not_yet, before) = bound_in_words(d, prev, first, ending);
        let l = Judged {
            first,
            epoch: e,
            n,
            top,
            not_yet,
            before,
            served: *served,
        };
        violations.extend(judge_leadership(d, &g, &mut lacking, l));
    }
    let ok = format!(
        "Each of the {} leaderships whose start was seen held every write acknowledged before it ({} had such writes): in its first read as leader, in the election it won, and in its final log.",
        g.starts.len(),
        with_prior
    );
    let m = CompletenessMeasurements {
        leaderships_judged: g.starts.len(),
        leaderships_with_prior_writes: with_prior,
        leaderships_bounded_by_a_fault: by_fault,
    };
    // Every violation here is one kind: a leader without a write acknowledged before its term.
    let kinded = violations
        .into_iter()
        .map(|v| (Kind::LeaderLacksWrite, v))
        .collect();
    Finding::judge_kinds(kinded, vec![], ok).with_measurements(super::Measurements::Completeness(m))
}

/// The one pass over the digest: acknowledged writes, final logs, and each leadership seen
/// (a node's first read leading an epoch after a read of it that did not).
fn gather(d: &Digest) -> Gathered<'_> {
    let mut g = Gathered {
        acks: Vec::new(),
        writes: 0,
        logs: vec![None; d.nodes.len()],
        starts: Vec::new(),
    };
    let mut last: Vec<Option<Status>> = vec![None; d.nodes.len()];
    let mut served: Vec<Option<u32>> = vec![None; d.nodes.len()];
    for r in d.records() {
        for n in d.started_afresh(r) {
            // A replaced server leads from nothing: its reads before are another server's.
            last[n as usize] = None;
            served[n as usize] = None;
        }
        match r {
            Rec::Write(w) => {
                g.writes += 1;
                if let (EventType::Ok, Some(z), Some(v)) = (w.kind, w.zxid, w.value.as_deref()) {
                    g.acks.push(Ack {
                        time: w.time,
                        zxid: z,
                        value: v,
                        pos: w.pos,
                    });
                }
            }
            Rec::Status(s) => {
                let i = s.node as usize;
                if let Some(e) = s.leads() {
                    if let Some(p) = last[i].filter(|p| p.leads() != Some(e)) {
                        g.starts.push(Start {
                            prev: p,
                            first: *s,
                            served: served[i],
                        });
                    }
                }
                if s.leads().is_some() || s.follows().is_some() {
                    served[i] = Some(s.pos);
                }
                last[i] = Some(*s);
            }
            Rec::FinalLog(l) => {
                if let Ok(es) = &l.entries {
                    g.logs[l.node as usize] = Some((l.pos, es.as_slice()));
                }
            }
            _ => {}
        }
    }
    g
}

/// What bounds the writes judged against a leadership, as evidence and in words: the fault
/// that ended the leadership before (`ending`), or the last read of this one's leader before
/// it led (`prev`).
fn bound_in_words(
    d: &Digest,
    prev: &Status,
    first: &Status,
    ending: Option<(&Reign, Ending)>,
) -> (EvRef, String) {
    let e = first.leads().unwrap_or(0);
    let name = d.name(first.node);
    match ending {
            Some((r, f)) => (
                EvRef::new(
                    f.pos,
                    format!("the fault that ended n{}'s leadership of epoch {}", r.sid, r.epoch),
                ),
                format!(
                    "acknowledged before the fault at {} that ended n{}'s leadership of epoch {} (so before epoch {e} began)",
                    moment(f.at_ns),
                    r.sid,
                    r.epoch
                ),
            ),
            None => (
                EvRef::new(prev.pos, format!("{name} not yet leading epoch {e}")),
                "acknowledged before its epoch began".to_string(),
            ),
        }
}

/// Judges one leadership against the writes acknowledged before it: its first read's last
/// zxid, the election it won, then its final log must hold them (the first that fails is
/// the violation).
fn judge_leadership(
    d: &Digest,
    g: &Gathered,
    lacking: &mut [Option<Vec<usize>>],
    l: Judged,
) -> Option<Item> {
    let Judged {
        first,
        epoch: e,
        n,
        top,
        not_yet,
        before,
        served,
    } = l;
    let name = d.name(first.node);
    let acked = |a: &Ack| {
        EvRef::new(
            a.pos,
            format!("write of {} acknowledged at zxid {:#x}", a.value, a.zxid),
        )
    };
    if first.last_zxid < top.zxid {
        return Some((
            format!(
                "{name} began leading epoch {e} with last zxid {:#x}, below zxid {:#x} of {}, {before}: the new leader lacks a committed write.",
                first.last_zxid, top.zxid, top.value
            ),
            vec![acked(top), not_yet.clone(), EvRef::new(first.pos, format!("{name} LEADING epoch {e}, last zxid {:#x}", first.last_zxid))],
        ));
    }
    // The election it reported deciding for itself before that first read, and after it last
    // served another term: an older one did not make this leadership (a ZooKeeper leader a
    // reconfig designates takes over without an election).
    let sid = d.sid(first.node);
    let won = d
        .elections
        .iter()
        .rfind(|el| el.node == first.node && el.pos <= first.pos)
        .filter(|el| served.is_none_or(|at| el.pos > at))
        .filter(|el| Some(el.summary.leader) == sid)
        // Led on FOLLOWING/LEADING notices for itself (a restarted leader rejoining its
        // ensemble): the vote is the standing ensemble's, from the election that first
        // elected it, so its zxid is older by construction; its log is judged by its first
        // read above. A stale notice for another server exempts nothing.
        .filter(|el| {
            !el.summary
                .votes
                .iter()
                .any(|v| v.settled_for(el.summary.leader))
        });
    if let Some(el) = won.filter(|el| el.summary.zxid < top.zxid) {
        return Some((
            format!(
                "{name} was elected for epoch {e} (round {}) with zxid {:#x}, below zxid {:#x} of {}, {before}: FLE elected a leader missing a committed write.",
                el.summary.round, el.summary.zxid, top.zxid, top.value
            ),
            vec![acked(top), not_yet, EvRef::new(el.pos, format!("{name}'s election of round {}", el.summary.round))],
        ));
    }
    // A final log of a server wiped since (`replace`) is a new server's.
    let wiped_since = d.next_fresh_start(first.node, first.time).is_some();
    if let Some((pos, entries)) = g.logs[first.node as usize]
        .as_ref()
        .filter(|_| !wiped_since)
    {
        let missing = lacking[first.node as usize].get_or_insert_with(|| lacks(entries, &g.acks));
        let missing = missing
            .iter()
            .take_while(|&&i| i < n)
            .map(|&i| &g.acks[i])
            .find(|a| a.zxid >> 32 < e);
        if let Some(missing) = missing {
            return Some((
                format!(
                    "{name} led epoch {e}, which began after {} was acknowledged (zxid {:#x}), yet {name}'s final log lacks it: a committed write its leadership should have kept.",
                    missing.value, missing.zxid
                ),
                vec![acked(missing), not_yet, EvRef::new(first.pos, format!("{name} LEADING epoch {e}")), EvRef::new(*pos, format!("{name} final log"))],
            ));
        }
    }
    None
}

/// The fault that ended the leadership before one of epoch `e` first read at `t`: the last
/// reign of a lower epoch seen standing before `t`, if a fault invoked by `t` ended it.
fn ended_before(reigns: &[Reign], e: u64, t: u64) -> Option<(&Reign, Ending)> {
    let before = reigns
        .iter()
        .rev()
        .find(|r| r.epoch < e && r.since_ns < t)?;
    let ending = before.ended_by.filter(|f| f.at_ns <= t)?;
    Some((before, ending))
}

/// The acknowledgements (indices into `acks`) whose value `entries` lacks. A value is looked
/// up by its acknowledged zxid while the log is strictly increasing in zxid (as a log is):
/// a binary search, no table of the log's values, which cost more than the rest of this
/// checker on a long run; only a value not at its zxid is looked for among all values.
fn lacks(entries: &[(u64, String)], acks: &[Ack]) -> Vec<usize> {
    let sorted = entries.windows(2).all(|w| w[0].0 < w[1].0);
    let mut values: Option<FastSet<&str>> = None;
    (0..acks.len())
        .filter(|&i| {
            let a = &acks[i];
            if sorted {
                if let Ok(j) = entries.binary_search_by_key(&a.zxid, |e| e.0) {
                    if entries[j].1 == a.value {
                        return false;
                    }
                }
            }
            let values =
                values.get_or_insert_with(|| entries.iter().map(|e| e.1.as_str()).collect());
            !values.contains(a.value)
        })
        .collect()
}
