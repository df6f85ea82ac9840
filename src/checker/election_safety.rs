//! election-safety: no two servers LEADING in the same epoch; no server FOLLOWING two different
//! leaders in one epoch; no follower following a leader that never led that epoch.
//!
//! Sampling is the trap here. A read is a snapshot taken somewhere before the controller's
//! receive time, and observers poll each node ~50 times a second, so:
//! - Two leaders of one epoch are a violation whenever they were seen, even far apart in time:
//!   an epoch is `max(acceptedEpoch) + 1` picked with a quorum, so it is led at most once ever.
//!   A stale leader (partitioned, still LEADING epoch e while another leads e+1) is an overlap
//!   the recovery checker measures, not a violation.
//! - A leader's `peer_epoch` is its epoch only from sync on, a follower's only in broadcast
//!   (see `Status::leads`/`follows`); other reads say nothing about the epoch led.
//! - Who led an epoch is `EpochLeaders`: a server read leading it, or followed in it by a
//!   follower in broadcast. Two servers shown so, either way, are two leaders of one epoch (or
//!   a follower following a server that did not lead it): both violations. A follower
//!   following a sid outside the ensemble is one too.
//! - A follower whose leader was never seen leading that epoch is a violation only with proof:
//!   a read of that leader, taken after the follower's read (plus the read slack), whose
//!   currentEpoch is still below the epoch (currentEpoch never decreases; a leader sets it
//!   before any follower can reach broadcast). The follow is confirmed instead when the
//!   leader's last read before the follower's shows it on its way to establishing the epoch,
//!   too fast for a read of it in sync: LEADING in discovery with an acceptedEpoch not past the
//!   epoch (a composed fault that kills a new leader the moment a follower syncs leaves no read
//!   of it in sync), or LOOKING with an acceptedEpoch below the epoch, taken within the read
//!   slack plus finalizeWait of the follower's read (in simulation the election's end,
//!   discovery and sync fit within one 20 ms read period). Neither confirms when a read of the
//!   leader within the read slack after the follower's is still below the epoch: taken after
//!   the follower's, it would be proof. Without proof or such a read, the leader may have led
//!   between two reads, and the verdict is unknown.
//! - Reads of two nodes within the read slack of each other are in no known order: a read that
//!   confirms a follow may have been taken after the follower's, and would then show the
//!   violation itself. Both confirmations take the order a correct leader allows; a leader that
//!   never led the epoch is still proven so by any later read of it below the epoch beyond the
//!   slack, and escapes only if it is never read so again.

use super::epoch_leaders::{Claim, EpochLeaders, Shown};
use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, NodeIx, Status};
use super::CheckOptions;
use crate::api::{ServerState, ZabPhase};
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};

pub const NAME: &str = "election-safety";

/// A follow whose leader was never read leading that epoch: (leader sid, the follower's read,
/// a later read of the leader below the epoch: the proof it never led it).
type Unconfirmed = (u64, Status, Option<Status>);

/// Judges the epochs' leaders: two shown leading one epoch, a follow of a sid outside the
/// ensemble, then the follows no read of their leader confirms (proven, confirmed by the
/// leader on its way to the epoch, or unknown).
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let shown = EpochLeaders::of(d);
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let mut unconfirmed = unconfirmed_follows(d, info, &shown, &mut violations);
    if !unconfirmed.is_empty() {
        unconfirmed = still_unconfirmed(d, info, opts.read_slack_ns(), unconfirmed);
    }
    judge_unconfirmed(d, &unconfirmed, &mut violations, &mut gaps);
    for n in &info.nodes {
        let ix = d.nodes.iter().position(|x| x == n);
        if ix.is_none_or(|i| d.reads[i] == 0) {
            gaps.push((format!("{n} was never read: it may have led."), vec![]));
        }
    }
    let epochs_led = epochs_led(d, &shown);
    let ok = format!(
        "Each of the {} epochs seen led was led by one server, and every follower in broadcast followed the one leader of its epoch.",
        epochs_led.len()
    );
    let m = ElectionSafetyMeasurements { epochs_led };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::ElectionSafety(m))
}

/// Pushes a violation for each epoch shown led by two servers and each follow of a sid
/// outside the ensemble; returns the follows whose leader was never read leading the epoch.
fn unconfirmed_follows(
    d: &Digest,
    info: &TestInfo,
    shown: &EpochLeaders,
    violations: &mut Vec<Item>,
) -> Vec<Unconfirmed> {
    let mut unconfirmed: Vec<Unconfirmed> = Vec::new();
    for (e, claims) in shown.epochs() {
        let sids = shown.sids(e);
        if sids.len() > 1 {
            violations.push(two_leaders(d, e, &sids, claims));
            continue;
        }
        for c in claims {
            if let Shown::FollowedBy(_) = c.shown {
                if !shown.read_leading(e, c.sid) {
                    unconfirmed.push((c.sid, c.read, None));
                }
            }
        }
    }
    // A sid outside the ensemble cannot have led anything.
    unconfirmed.retain(|(l, f, _)| {
        if d.node_of_sid(*l).is_some() {
            return true;
        }
        let (fname, e) = (d.name(f.node), f.peer_epoch);
        violations.push((
            format!("{fname} followed n{l} in epoch {e}, but n{l} is not a server of this ensemble ({}).", info.nodes.join(", ")),
            vec![EvRef::new(f.pos, format!("{fname} FOLLOWING n{l} in epoch {e}"))],
        ));
        false
    });
    unconfirmed
}

/// One pass over the leaders' reads: finds the proof of each unconfirmed follow (a read of
/// its leader after the slack, below the epoch), and drops the follows its leader's last read
/// before shows on its way to establishing the epoch, unless a read within the slack doubts it.
fn still_unconfirmed(
    d: &Digest,
    info: &TestInfo,
    slack: u64,
    mut unconfirmed: Vec<Unconfirmed>,
) -> Vec<Unconfirmed> {
    let leader_nodes: Vec<Option<NodeIx>> =
        unconfirmed.iter().map(|u| d.node_of_sid(u.0)).collect();
    // The leader's last read before each follower's read, and whether a read of it within
    // the slack after the follower's is still below the epoch.
    let mut before: Vec<Option<Status>> = vec![None; unconfirmed.len()];
    let mut doubt: Vec<bool> = vec![false; unconfirmed.len()];
    for s in d.statuses() {
        let each = unconfirmed.iter_mut().zip(&leader_nodes);
        for (((u, ln), last), doubt) in each.zip(&mut before).zip(&mut doubt) {
            let (_, f, proof) = u;
            if *ln != Some(s.node) {
                continue;
            }
            let below = s.peer_epoch < f.peer_epoch;
            if s.time < f.time {
                *last = Some(*s);
            } else if s.time < f.time + slack {
                *doubt |= below;
            } else if proof.is_none() && below {
                *proof = Some(*s);
            }
        }
    }
    // A LOOKING read counts only near the end of the election it caught: a server holding
    // a quorum of votes leads after finalizeWait without a better one, and discovery and
    // sync then take round trips. The follower's read may be up to the slack old, so the
    // LOOKING read may be that much older. An older one says nothing of this epoch (the
    // leader may have led, lost or followed since); a slower establishment stays unknown.
    let fresh = slack + info.finalize_wait_ms() * 1_000_000;
    // On its way to establishing epoch e when `f` was read: electing, not yet past e, or
    // leading in discovery, not past e.
    let establishing = |s: &Option<Status>, f: &Status| {
        let e = f.peer_epoch;
        s.is_some_and(|s| match (s.state, s.phase) {
            (ServerState::Leading, ZabPhase::Discovery) => s.accepted_epoch <= e,
            (ServerState::Looking, _) => s.accepted_epoch < e && f.time - s.time <= fresh,
            _ => false,
        })
    };
    (unconfirmed.into_iter().zip(before).zip(doubt))
        .filter(|(((_, f, proof), last), doubt)| {
            proof.is_some() || *doubt || !establishing(last, f)
        })
        .map(|((u, _), _)| u)
        .collect()
}

/// A violation for each follow proven (its leader read later below the epoch), a gap for
/// each other.
fn judge_unconfirmed(
    d: &Digest,
    unconfirmed: &[Unconfirmed],
    violations: &mut Vec<Item>,
    gaps: &mut Vec<Item>,
) {
    for (leader, f, proof) in unconfirmed {
        let e = f.peer_epoch;
        let fname = d.name(f.node);
        let follow = EvRef::new(f.pos, format!("{fname} FOLLOWING n{leader} in epoch {e}"));
        match proof {
            Some(p) => violations.push((
                format!(
                    "{fname} followed n{leader} in epoch {e}, but n{leader} had not even reached epoch {e} when read later (currentEpoch {}).",
                    p.peer_epoch
                ),
                vec![
                    follow,
                    EvRef::new(p.pos, format!("n{leader} later at currentEpoch {}", p.peer_epoch)),
                ],
            )),
            None => gaps.push((
                format!(
                    "{fname} followed n{leader} in epoch {e}, but n{leader} was never seen leading epoch {e} (it may have led between two reads)."
                ),
                vec![follow],
            )),
        }
    }
}

/// The servers read LEADING each epoch, for the measurement.
fn epochs_led(d: &Digest, shown: &EpochLeaders) -> Vec<EpochLed> {
    shown
        .epochs()
        .filter_map(|(e, claims)| {
            let reads: Vec<&Status> = claims
                .iter()
                .filter(|c| c.shown == Shown::Leading)
                .map(|c| &c.read)
                .collect();
            Some(EpochLed {
                epoch: e,
                leaders: reads.iter().map(|s| d.name(s.node).to_string()).collect(),
                first_seen_index: reads.first()?.index,
            })
        })
        .collect()
}

/// What election-safety measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElectionSafetyMeasurements {
    pub epochs_led: Vec<EpochLed>,
}

/// An epoch seen led, by whom (more than one: a violation), first seen at which event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochLed {
    pub epoch: u64,
    pub leaders: Vec<String>,
    pub first_seen_index: u64,
}

/// Epoch `e` shown led by several servers: each one's first claim as evidence.
fn two_leaders(d: &Digest, e: u64, sids: &[u64], claims: &[Claim]) -> Item {
    // Per sid, its own LEADING read when there is one, else the first follower's read.
    let firsts: Vec<&Claim> = sids
        .iter()
        .filter_map(|sid| {
            let mine = claims.iter().filter(|c| c.sid == *sid);
            mine.clone()
                .find(|c| c.shown == Shown::Leading)
                .or_else(|| mine.into_iter().next())
        })
        .collect();
    let said = |c: &Claim| match c.shown {
        Shown::Leading => format!("{} LEADING epoch {e}", d.name(c.read.node)),
        Shown::FollowedBy(f) => format!("{} FOLLOWING n{} in epoch {e}", d.name(f), c.sid),
    };
    let evidence = firsts
        .iter()
        .map(|c| EvRef::new(c.read.pos, said(c)))
        .collect();
    let text = if firsts.iter().all(|c| c.shown == Shown::Leading) {
        let names: Vec<&str> = firsts.iter().map(|c| d.name(c.read.node)).collect();
        format!(
            "{} {} led epoch {e}.",
            names.join(" and "),
            if names.len() == 2 { "both" } else { "all" }
        )
    } else {
        let how: Vec<String> = firsts.iter().map(|c| said(c)).collect();
        format!(
            "Epoch {e} had more than one leader (a follower in broadcast follows the one server that established its epoch): {}.",
            how.join("; ")
        )
    };
    (text, evidence)
}
