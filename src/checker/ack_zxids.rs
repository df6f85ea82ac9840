//! ack-zxids (writes workload): every acknowledged zxid belongs to an epoch led by the server
//! that acknowledged it (or by the leader it was following in that epoch, when it forwarded
//! the write, as a ZooKeeper follower does); no zxid is acknowledged for two values; and zxids
//! grow with acknowledgement order: a write invoked after another was acknowledged gets a
//! higher zxid (Zab orders every write, so real-time order holds in each epoch and across).
//!
//! "Led by" is `EpochLeaders` (a server read leading the epoch, or followed in it by a
//! follower in broadcast). An acknowledgement by a server neither shown leading its epoch nor
//! read in broadcast in it is a violation with proof: a read of it taken after the
//! acknowledgement (plus the read slack) whose currentEpoch is still below the zxid's epoch
//! (currentEpoch never decreases), or an epoch above every epoch any server ever accepted, with
//! every server read after the acknowledgement. Without proof it may have followed the epoch's
//! leader between two reads (a follower joins in a long discovery, then reaches broadcast in
//! milliseconds; reads fail under load), or the epoch may have been led between reads: unknown.
//!
//! What it cannot see: writes without a zxid (failed or unknown ones), and which leader a
//! follower forwarded a write to beyond what its reads show. It needs the writes workload.

use super::epoch_leaders::EpochLeaders;
use super::finding::{EvRef, Finding, Item};
use super::fxhash::{map_with, FastMap, FastSet};
use super::model::{Digest, Rec, WriteOp};
use super::CheckOptions;
use crate::history::test_info::TestInfo;
use crate::history::EventType;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "ack-zxids";

/// What ack-zxids measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AckZxidsMeasurements {
    pub acknowledged_with_zxid: usize,
    /// Epochs the acknowledged zxids fall in.
    pub epochs_with_writes: usize,
}

/// A node's epoch read: (time, currentEpoch, acceptedEpoch, pos).
type EpochRead = (u64, u64, u64, u32);

/// What one pass over the digest gathers, its accumulators side by side because they are
/// fed from the same records.
struct Gathered<'a> {
    /// Who showed leading (or following in broadcast) which epoch.
    shown: EpochLeaders,
    /// The first invocation time of each written value.
    invokes: FastMap<&'a str, u64>,
    /// Acknowledged writes with a zxid, in history order.
    acks: Vec<&'a WriteOp>,
    /// Write records of any kind.
    writes: usize,
    /// Per node: its reads where an epoch moved, for proofs.
    reads: Vec<Vec<EpochRead>>,
}

/// Checks the acknowledged zxids: gathers them in one pass, judges each against the epochs'
/// leaders, then their real-time order.
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let g = gather(d);
    if let Some(gap) = super::nothing_acknowledged(NAME, info, g.writes, g.acks.len()) {
        return Finding::judge(vec![], vec![gap], String::new());
    }
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let epochs = judge_acks(
        &g,
        d,
        info,
        opts.read_slack_ns(),
        &mut violations,
        &mut gaps,
    );
    check_real_time_order(&g, &mut violations);
    let ok = format!(
        "Each of the {} acknowledged zxids belongs to an epoch led by the server that acknowledged it (or the leader it followed), none was acknowledged twice, and zxids grew with acknowledgement order.",
        g.acks.len()
    );
    let m = AckZxidsMeasurements {
        acknowledged_with_zxid: g.acks.len(),
        epochs_with_writes: epochs,
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::AckZxids(m))
}

/// The one pass over the digest: epoch leaders, invocations, acknowledgements and each node's
/// epoch reads (only where an epoch moved: the proofs need no more).
fn gather(d: &Digest) -> Gathered<'_> {
    let mut g = Gathered {
        shown: EpochLeaders::new(d),
        invokes: FastMap::default(),
        acks: Vec::new(),
        writes: 0,
        reads: vec![Vec::new(); d.nodes.len()],
    };
    for r in d.records() {
        match r {
            Rec::Status(s) => {
                g.shown.read(s);
                let rs = &mut g.reads[s.node as usize];
                // Only changes matter for proofs: keep a read when an epoch moved.
                if rs
                    .last()
                    .is_none_or(|x| (x.1, x.2) != (s.peer_epoch, s.accepted_epoch))
                {
                    rs.push((s.time, s.peer_epoch, s.accepted_epoch, s.pos));
                } else if let Some(x) = rs.last_mut() {
                    // Keep the latest time and position of an unchanged stretch.
                    (x.0, x.3) = (s.time, s.pos);
                }
            }
            Rec::Write(w) => {
                g.writes += 1;
                match (w.kind, w.value.as_deref()) {
                    (EventType::Invoke, Some(v)) => {
                        g.invokes.entry(v).or_insert(w.time);
                    }
                    (EventType::Ok, Some(_)) if w.zxid.is_some() => g.acks.push(w),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    g
}

/// Judges each acknowledged zxid: one value per zxid, and an epoch led (or followed) by the
/// server that acknowledged it; a violation only with proof, else a gap. Returns how many
/// epochs the acknowledged zxids fall in.
fn judge_acks(
    g: &Gathered,
    d: &Digest,
    info: &TestInfo,
    slack: u64,
    violations: &mut Vec<Item>,
    gaps: &mut Vec<Item>,
) -> usize {
    let (shown, reads) = (&g.shown, &g.reads);
    let max_accepted = reads.iter().flatten().map(|r| r.2).max().unwrap_or(0);
    let mut by_zxid: FastMap<u64, &WriteOp> = map_with(g.acks.len());
    let mut epochs: FastSet<u64> = FastSet::default();
    for w in &g.acks {
        let (z, v) = (w.zxid.unwrap_or(0), w.value.as_deref().unwrap_or(""));
        let e = z >> 32;
        epochs.insert(e);
        // Words only for evidence, which a valid run never needs.
        let ack = || EvRef::new(w.pos, format!("write of {v} acknowledged at zxid {z:#x}"));
        if let Some(o) = by_zxid.insert(z, w) {
            if o.value != w.value {
                violations.push((
                    format!(
                        "zxid {z:#x} was acknowledged for two values, {} and {v}.",
                        o.value.as_deref().unwrap_or("")
                    ),
                    vec![EvRef::new(o.pos, "first acknowledgement"), ack()],
                ));
                continue;
            }
        }
        let Some(n) = w.node else { continue };
        let name = d.name(n);
        // It led e, or followed (the leader of) e in broadcast and forwarded the write there.
        if d.sid(n).is_some_and(|sid| shown.led(e, sid)) || shown.followed_in(n, e) {
            continue;
        }
        // Proof that it did neither: it never reached epoch e, or no server ever accepted e.
        let later = |rs: &Vec<EpochRead>| rs.iter().copied().find(|r| r.0 >= w.time + slack);
        // Only a read of the same server, not of a fresh one its wipe started (`replace`).
        let wiped = d.next_fresh_start(n, w.time);
        let behind =
            (later(&reads[n as usize])).filter(|r| r.1 < e && wiped.is_none_or(|t| r.0 < t));
        let all_read_after = info.nodes.iter().all(|m| {
            d.nodes
                .iter()
                .position(|x| x == m)
                .is_some_and(|i| reads[i].last().is_some_and(|r| r.0 >= w.time + slack))
        });
        if let Some(r) = behind {
            violations.push((
                format!("{name} acknowledged {v} at zxid {z:#x} of epoch {e}, but {name} was read later still at currentEpoch {}: it never led epoch {e}.", r.1),
                vec![ack(), EvRef::new(r.3, format!("{name} later at currentEpoch {}", r.1))],
            ));
            continue;
        }
        if e > max_accepted && all_read_after {
            violations.push((
                format!("{name} acknowledged {v} at zxid {z:#x} of epoch {e}, an epoch no server ever accepted (the highest acceptedEpoch read is {max_accepted})."),
                vec![ack()],
            ));
            continue;
        }
        // No proof: it may have followed the epoch's leader between two reads (joining takes
        // a long discovery, then milliseconds to broadcast; reads fail under load).
        let why = match shown.claims(e).first() {
            Some(c) => format!("epoch {e} was led by n{}, and {name} was never read in broadcast in it (it may have been between two reads)", c.sid),
            None => format!("no read shows epoch {e} led (it may have been led between reads)"),
        };
        gaps.push((
            format!("{name} acknowledged {v} at zxid {z:#x} of epoch {e}, but {why}."),
            vec![ack()],
        ));
    }
    epochs.len()
}

/// Real-time order: an acknowledgement before a write's invocation means a lower zxid.
fn check_real_time_order(g: &Gathered, violations: &mut Vec<Item>) {
    let mut by_ok: Vec<&WriteOp> = g.acks.clone();
    by_ok.sort_by_key(|w| w.time);
    // Running maximum of zxids by acknowledgement time: (time, zxid, the write).
    let mut running: Vec<(u64, u64, &WriteOp)> = Vec::with_capacity(by_ok.len());
    for w in &by_ok {
        let z = w.zxid.unwrap_or(0);
        let top = running.last().filter(|r| r.1 >= z).map(|r| (r.1, r.2));
        let (zz, ww) = top.unwrap_or((z, w));
        running.push((w.time, zz, ww));
    }
    for w in &g.acks {
        let (z, v) = (w.zxid.unwrap_or(0), w.value.as_deref().unwrap_or(""));
        let Some(&inv) = g.invokes.get(v) else {
            continue;
        };
        let before = running.partition_point(|r| r.0 < inv);
        if before == 0 {
            continue;
        }
        let (_, top, o) = running[before - 1];
        if top >= z && o.value != w.value {
            violations.push((
                format!("{v} was invoked after {} was acknowledged at zxid {top:#x}, yet was acknowledged at the lower or equal zxid {z:#x}: zxids must follow acknowledgement order.", o.value.as_deref().unwrap_or("")),
                vec![
                    EvRef::new(o.pos, format!("write acknowledged at zxid {top:#x}")),
                    EvRef::new(w.pos, format!("write of {v} acknowledged at zxid {z:#x}")),
                ],
            ));
        }
    }
}
