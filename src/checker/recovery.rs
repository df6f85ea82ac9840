//! recovery: after the final heal, a quorum agrees on one leader within a bound; and, measured
//! for the report: for every fault, the time until a leader backed by a quorum is observed
//! again; every leaderless window; every overlap where two servers both claim to lead (in
//! different epochs: a stale leader, reported but not invalid; the same epoch is
//! election-safety's violation).
//!
//! "A quorum agrees" is judged on the controller's latest successful read of each node: a leader
//! that leads (sync/broadcast) epoch e plus the nodes following it in broadcast in epoch e make
//! at least a quorum. A failed read or a kill forgets what was known of that node. After a
//! fault, and after the final heal, only reads taken after it count, so a leader seen just
//! before a kill does not count as "observed again".

use super::finding::{secs, EvRef, Finding, Item};
use super::model::{Digest, NemesisOp, Rec, Status};
use super::CheckOptions;
use crate::history::test_info::TestInfo;
use crate::history::{EventType, F};
use serde_json::json;

pub const NAME: &str = "recovery";

/// The default bound: a stale leader or follower notices after syncLimit ticks; the election
/// then takes finalizeWait (200 ms) plus notification backoff, and followers get initLimit ticks
/// to connect and sync; 2 s more covers restarting killed processes.
pub fn default_bound_ms(info: &TestInfo) -> u64 {
    (info.sync_limit as u64 + info.init_limit as u64) * info.tick_ms + 2000
}

/// The leader (sid, epoch) a quorum of `view` agrees on, if any.
fn quorum_leader(d: &Digest, view: &[Option<Status>], quorum: usize) -> Option<(u64, u64)> {
    view.iter().flatten().find_map(|l| {
        let e = l.leads()?;
        let sid = d.sid(l.node)?;
        let followers = view
            .iter()
            .flatten()
            .filter(|f| f.follows() == Some((sid, e)))
            .count();
        (1 + followers >= quorum).then_some((sid, e))
    })
}

struct Pending<'a> {
    fault: &'a NemesisOp,
}

pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let quorum = info.quorum();
    let bound_ms = opts
        .recovery_bound_ms
        .unwrap_or_else(|| default_bound_ms(info));
    let n = d.nodes.len();
    let mut view: Vec<Option<Status>> = vec![None; n];
    // Reads since the last fault (or final heal) started.
    let mut fresh: Vec<Option<Status>> = vec![None; n];
    let mut pending: Vec<Pending> = Vec::new();
    let mut final_heal: Option<&NemesisOp> = None;
    // The heal is done at its `info`; only a history without one falls back to the `invoke`.
    let final_kind = if d
        .records()
        .any(|r| matches!(r, Rec::Nemesis(op) if op.is_final && op.kind == EventType::Info))
    {
        EventType::Info
    } else {
        EventType::Invoke
    };
    let mut recovered: Option<(u64, u32, (u64, u64))> = None;
    let mut fault_times = Vec::new();

    let mut window_start: Option<u64> = None;
    let mut windows = Vec::new();
    let mut overlap: Option<(u64, Vec<(String, u64)>)> = None;
    let mut overlaps = Vec::new();
    let mut end_time = 0u64;

    for r in d.records() {
        let (time, pos) = match r {
            Rec::Status(s) => {
                view[s.node as usize] = Some(*s);
                fresh[s.node as usize] = Some(*s);
                (s.time, s.pos)
            }
            Rec::Unreachable { pos, time, node } => {
                view[*node as usize] = None;
                fresh[*node as usize] = None;
                (*time, *pos)
            }
            Rec::Nemesis(op) => {
                if op.f == F::Kill && op.kind == EventType::Info {
                    for &node in &op.nodes {
                        view[node as usize] = None;
                    }
                }
                let is_final = op.is_final && op.kind == final_kind && final_heal.is_none();
                if op.starts_fault() || is_final {
                    fresh.iter_mut().for_each(|v| *v = None);
                }
                if op.starts_fault() {
                    pending.push(Pending { fault: op });
                }
                if is_final {
                    final_heal = Some(op);
                }
                (op.time, op.pos)
            }
            Rec::Write(w) => (w.time, w.pos),
            Rec::FinalLog(_) => continue,
        };
        // Observers append concurrently, so times can step back a little between lines;
        // the running maximum keeps every interval non-negative.
        let time = time.max(end_time);
        end_time = time;

        // A leaderless window opens at the first record without a quorum leader.
        match (quorum_leader(d, &view, quorum).is_some(), window_start) {
            (true, Some(start)) => {
                windows.push(
                    json!({"start_ns": start, "end_ns": time, "ms": (time - start) / 1_000_000}),
                );
                window_start = None;
            }
            (false, None) => window_start = Some(time),
            _ => {}
        }

        let leading = view
            .iter()
            .flatten()
            .filter(|s| s.leads().is_some())
            .count();
        match (&overlap, leading >= 2) {
            (None, true) => {
                let claims: Vec<(String, u64)> = view
                    .iter()
                    .flatten()
                    .filter_map(|s| s.leads().map(|e| (d.name(s.node).to_string(), e)))
                    .collect();
                overlap = Some((time, claims));
            }
            (Some((start, who)), false) => {
                overlaps.push(json!({"start_ns": start, "end_ns": time, "ms": (time - start) / 1_000_000, "leaders": who}));
                overlap = None;
            }
            _ => {}
        }

        if let Some(fl) = quorum_leader(d, &fresh, quorum) {
            for p in pending.drain(..) {
                fault_times.push(json!({
                    "fault_index": p.fault.index, "f": p.fault.f, "nodes": p.fault.nodes.iter().map(|&x| d.name(x)).collect::<Vec<_>>(),
                    "ms_to_quorum_leader": (time - p.fault.time) / 1_000_000,
                    "leader": format!("n{}", fl.0), "epoch": fl.1,
                }));
            }
            if let (Some(h), None) = (final_heal, recovered) {
                recovered = Some((time - h.time, pos, fl));
            }
        }
    }
    if let Some(start) = window_start {
        windows.push(json!({"start_ns": start, "end_ns": end_time, "ms": (end_time - start) / 1_000_000, "open_at_end": true}));
    }
    if let Some((start, who)) = overlap {
        overlaps.push(json!({"start_ns": start, "end_ns": end_time, "ms": (end_time - start) / 1_000_000, "leaders": who, "open_at_end": true}));
    }
    for p in &pending {
        fault_times.push(
            json!({"fault_index": p.fault.index, "f": p.fault.f, "ms_to_quorum_leader": null}),
        );
    }

    let bound_ns = bound_ms * 1_000_000;
    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let mut ok = String::new();
    match (final_heal, recovered) {
        (None, _) => gaps.push((
            "The history has no final heal (no nemesis event with \"final\": true): the run may have ended early, so recovery cannot be judged.".to_string(),
            vec![],
        )),
        (Some(h), Some((took, pos, (l, e)))) => {
            let heal = EvRef::new(h.pos, "final heal");
            let agreed = EvRef::new(pos, format!("quorum agrees on n{l} (epoch {e})"));
            if took > bound_ns {
                violations.push((
                    format!("After the final heal a quorum agreed on a leader (n{l}, epoch {e}) only after {}, beyond the bound of {bound_ms} ms.", secs(took)),
                    vec![heal, agreed],
                ));
            } else {
                ok = format!("After the final heal a quorum agreed on n{l} (epoch {e}) within {} (bound {bound_ms} ms).", secs(took));
            }
        }
        (Some(h), None) => {
            let seen = end_time.saturating_sub(h.time);
            let heal = EvRef::new(h.pos, "final heal");
            if seen >= bound_ns {
                violations.push((
                    format!("No quorum agreed on a leader in the {} the history covers after the final heal (bound {bound_ms} ms).", secs(seen)),
                    vec![heal],
                ));
            } else {
                gaps.push((
                    format!("The history ends {} after the final heal, before the bound of {bound_ms} ms, with no quorum agreeing on a leader yet.", secs(seen)),
                    vec![heal],
                ));
            }
        }
    }
    let (n_windows, windows_ms) = (windows.len(), total_ms(&windows));
    let windows_max = windows.iter().filter_map(|w| w["ms"].as_u64()).max();
    let (n_overlaps, overlaps_ms) = (overlaps.len(), total_ms(&overlaps));
    let m = json!({
        "bound_ms": bound_ms,
        "quorum": quorum,
        "final_heal_to_quorum_leader_ms": recovered.map(|r| r.0 / 1_000_000),
        "faults": capped(fault_times),
        "leaderless_windows": capped(windows),
        "leaderless_windows_count": n_windows,
        "leaderless_ms_total": windows_ms,
        "leaderless_ms_max": windows_max,
        "leader_overlaps": capped(overlaps),
        "leader_overlaps_count": n_overlaps,
        "leader_overlap_ms_total": overlaps_ms,
    });
    Finding::judge(violations, gaps, ok).with_measurements(m)
}

/// A flapping cluster can open thousands of windows: list the first 1000 (counts and totals
/// cover them all).
fn capped(mut v: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    v.truncate(1000);
    v
}

fn total_ms(v: &[serde_json::Value]) -> u64 {
    v.iter().filter_map(|w| w["ms"].as_u64()).sum()
}
