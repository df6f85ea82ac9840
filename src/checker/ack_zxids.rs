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

/// One pass over the digest with its accumulators side by side (who showed leading which
/// epoch, invocations, acknowledgements, each node's epoch reads), then the judgement of each
/// acknowledged zxid: long because the accumulators are fed from the same records.
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let slack = opts.read_slack_ns();
    let mut shown = EpochLeaders::new(d);
    let mut invokes: FastMap<&str, u64> = FastMap::default();
    let mut acks: Vec<&WriteOp> = Vec::new();
    let mut writes = 0usize;
    // Per node: its reads as (time, currentEpoch, acceptedEpoch, pos), for proofs.
    let mut reads: Vec<Vec<(u64, u64, u64, u32)>> = vec![Vec::new(); d.nodes.len()];
    for r in d.records() {
        match r {
            Rec::Status(s) => {
                shown.read(s);
                let rs = &mut reads[s.node as usize];
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
                writes += 1;
                match (w.kind, w.value.as_deref()) {
                    (EventType::Invoke, Some(v)) => {
                        invokes.entry(v).or_insert(w.time);
                    }
                    (EventType::Ok, Some(_)) if w.zxid.is_some() => acks.push(w),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if let Some(gap) = super::nothing_acknowledged(NAME, info, writes, acks.len()) {
        return Finding::judge(vec![], vec![gap], String::new());
    }
    let max_accepted = reads.iter().flatten().map(|r| r.2).max().unwrap_or(0);
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let mut by_zxid: FastMap<u64, &WriteOp> = map_with(acks.len());
    let mut epochs: FastSet<u64> = FastSet::default();
    for w in &acks {
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
        let later =
            |rs: &Vec<(u64, u64, u64, u32)>| rs.iter().copied().find(|r| r.0 >= w.time + slack);
        let behind = later(&reads[n as usize]).filter(|r| r.1 < e);
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

    // Real-time order: an acknowledgement before a write's invocation means a lower zxid.
    let mut by_ok: Vec<&WriteOp> = acks.clone();
    by_ok.sort_by_key(|w| w.time);
    // Running maximum of zxids by acknowledgement time: (time, zxid, the write).
    let mut running: Vec<(u64, u64, &WriteOp)> = Vec::with_capacity(by_ok.len());
    for w in &by_ok {
        let z = w.zxid.unwrap_or(0);
        let top = running.last().filter(|r| r.1 >= z).map(|r| (r.1, r.2));
        let (zz, ww) = top.unwrap_or((z, w));
        running.push((w.time, zz, ww));
    }
    for w in &acks {
        let (z, v) = (w.zxid.unwrap_or(0), w.value.as_deref().unwrap_or(""));
        let Some(&inv) = invokes.get(v) else { continue };
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
    let ok = format!(
        "Each of the {} acknowledged zxids belongs to an epoch led by the server that acknowledged it (or the leader it followed), none was acknowledged twice, and zxids grew with acknowledgement order.",
        acks.len()
    );
    let m = AckZxidsMeasurements {
        acknowledged_with_zxid: acks.len(),
        epochs_with_writes: epochs.len(),
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::AckZxids(m))
}
