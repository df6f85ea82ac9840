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
//! - A follower whose leader was never seen leading that epoch is a violation only with proof:
//!   a read of that leader, taken after the follower's read (plus the read slack), whose
//!   currentEpoch is still below the epoch (currentEpoch never decreases; a leader sets it
//!   before any follower can reach broadcast). The follow is confirmed instead when the
//!   leader's last read before the follower's showed it LEADING in discovery with an
//!   acceptedEpoch not past the epoch: it was establishing that epoch, and discovery and sync
//!   take milliseconds (a composed fault that kills a new leader the moment a follower syncs
//!   leaves no read of it in sync). Without proof or that read, the leader may have led between
//!   two reads, and the verdict is unknown.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, NodeIx, Status};
use super::CheckOptions;
use crate::api::{ServerState, ZabPhase};
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const NAME: &str = "election-safety";

pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    // epoch -> the first read of each node leading it
    let mut leaders: BTreeMap<u64, Vec<Status>> = BTreeMap::new();
    // (follower, epoch) -> the first read of it following each leader
    let mut follows: BTreeMap<(NodeIx, u64), Vec<(u64, Status)>> = BTreeMap::new();
    for s in d.statuses() {
        if let Some(e) = s.leads() {
            let seen = leaders.entry(e).or_default();
            if !seen.iter().any(|o| o.node == s.node) {
                seen.push(*s);
            }
        }
        if let Some((leader, e)) = s.follows() {
            let seen = follows.entry((s.node, e)).or_default();
            if !seen.iter().any(|o| o.0 == leader) {
                seen.push((leader, *s));
            }
        }
    }

    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    for (e, reads) in &leaders {
        if reads.len() > 1 {
            let names: Vec<&str> = reads.iter().map(|s| d.name(s.node)).collect();
            violations.push((
                format!(
                    "{} {} led epoch {e}.",
                    names.join(" and "),
                    if names.len() == 2 { "both" } else { "all" }
                ),
                reads
                    .iter()
                    .map(|s| EvRef::new(s.pos, format!("{} LEADING epoch {e}", d.name(s.node))))
                    .collect(),
            ));
        }
    }
    for ((f, e), seen) in &follows {
        if seen.len() > 1 {
            let ls: Vec<String> = seen.iter().map(|(l, _)| format!("n{l}")).collect();
            violations.push((
                format!("{} followed {} in epoch {e}.", d.name(*f), ls.join(" and ")),
                seen.iter()
                    .map(|(l, s)| {
                        EvRef::new(s.pos, format!("{} FOLLOWING n{l} in epoch {e}", d.name(*f)))
                    })
                    .collect(),
            ));
        }
    }

    // Follows whose leader was never seen leading that epoch: look for proof, else a gap.
    let mut unconfirmed: Vec<(u64, Status, Option<Status>)> = Vec::new();
    for ((_, e), seen) in &follows {
        for (l, s) in seen {
            let led = leaders
                .get(e)
                .is_some_and(|r| r.iter().any(|x| d.sid(x.node) == Some(*l)));
            if !led {
                unconfirmed.push((*l, *s, None));
            }
        }
    }
    if !unconfirmed.is_empty() {
        let slack = opts.read_slack_ns();
        let leader_nodes: Vec<Option<NodeIx>> =
            unconfirmed.iter().map(|u| d.node_of_sid(u.0)).collect();
        // The leader's last read before each follower's read.
        let mut before: Vec<Option<Status>> = vec![None; unconfirmed.len()];
        for s in d.statuses() {
            for ((u, ln), last) in unconfirmed.iter_mut().zip(&leader_nodes).zip(&mut before) {
                let (_, f, proof) = u;
                if *ln != Some(s.node) {
                    continue;
                }
                if s.time < f.time {
                    *last = Some(*s);
                }
                if proof.is_none() && s.time >= f.time + slack && s.peer_epoch < f.peer_epoch {
                    *proof = Some(*s);
                }
            }
        }
        // Leading, in discovery, not past the epoch: it was establishing this epoch.
        let establishing = |s: &Option<Status>, e: u64| {
            s.is_some_and(|s| {
                s.state == ServerState::Leading
                    && s.phase == ZabPhase::Discovery
                    && s.accepted_epoch <= e
            })
        };
        unconfirmed = (unconfirmed.into_iter().zip(before))
            .filter(|((_, f, proof), last)| proof.is_some() || !establishing(last, f.peer_epoch))
            .map(|(u, _)| u)
            .collect();
    }
    for (leader, f, proof) in &unconfirmed {
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

    for n in &info.nodes {
        let ix = d.nodes.iter().position(|x| x == n);
        if ix.is_none_or(|i| d.reads[i] == 0) {
            gaps.push((format!("{n} was never read: it may have led."), vec![]));
        }
    }

    let epochs = leaders.len();
    let ok = format!(
        "Each of the {epochs} epochs seen led was led by one server, and every follower in broadcast followed the one leader of its epoch."
    );
    let m = ElectionSafetyMeasurements {
        epochs_led: leaders
            .iter()
            .map(|(e, r)| EpochLed {
                epoch: *e,
                leaders: r.iter().map(|s| d.name(s.node).to_string()).collect(),
                first_seen_index: r[0].index,
            })
            .collect(),
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::ElectionSafety(m))
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
