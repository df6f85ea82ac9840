//! Doing and undoing one fault on a live cluster, and recording both in the history.
//!
//! Every action is an `invoke` then an `info` (done, saying exactly what: nodes, pids, rules,
//! offsets) or a `fail` (it could not be done), as the history conventions require. An applied
//! fault returns an `Active` that knows how to undo itself. What each kind does is its own
//! file's (`super::faults`); this module resolves whom it hits and records what failed.
//!
//! What a cluster can do comes from its capabilities, never from its backend's name: a
//! partition needs `Control::net`, a clock fault `Target::clock`; without them the fault is
//! recorded as `fail`.

use super::faults::{self, Active, Order};
use super::schedule::{PlannedFault, TargetSpec};
use super::seam::NemesisContext;
use super::targets::{resolve, Ensemble};
use crate::history::{EventType, NEMESIS};
use serde_json::{json, Value};

/// How stale an observation may be to count as "the leader now".
pub(crate) const LEADER_MAX_AGE_NS: u64 = 1_000_000_000;

/// The leader the observers' fresh reads show, if any.
fn leader_now(ctx: &NemesisContext) -> Option<String> {
    ctx.observations
        .leader(ctx.recorder.now(), LEADER_MAX_AGE_NS)
        .map(|(name, _)| name)
}

/// `spec`'s nodes now (a trigger's `watch`), resolved as a fault's target would be.
pub(super) fn resolve_now(ctx: &NemesisContext, spec: &TargetSpec, pick: u64) -> Vec<String> {
    let nodes = ctx.observations.nodes().to_vec();
    resolve(
        spec,
        ensemble(ctx, &nodes),
        leader_now(ctx).as_deref(),
        pick,
    )
    .nodes
}

/// The run's `nodes` with its observers.
fn ensemble<'a>(ctx: &'a NemesisContext, nodes: &'a [String]) -> Ensemble<'a> {
    Ensemble {
        nodes,
        observers: &ctx.settings.observers,
    }
}

/// What every fault's recorded value starts with: the nodes it hits, its target, when it was
/// due and for how long, and what aimed it (the runner's annotations). The simulator records
/// its faults with this too.
pub fn base_value(fault: &PlannedFault, resolved: &crate::nemesis::targets::Resolved) -> Value {
    let t = &fault.template;
    let mut base = json!({
        "nodes": resolved.nodes,
        "target": t.target.describe(),
        "duration_ms": fault.duration.as_millis() as u64,
        // When it was due, from the workload's start: anchors a replay's times (`timed`).
        "at_ms": fault.start.as_millis() as u64,
    });
    if let Some(note) = &resolved.note {
        base["note"] = json!(note);
    }
    // What aimed it (trigger, trigger_index) and its composed group, from the runner.
    for (k, v) in &fault.annotations {
        base[k.as_str()] = v.clone();
    }
    base
}

/// Applies `fault` (its kind's [`Fault::apply`]), recording it. Returns None when nothing was
/// done (recorded as `fail`).
pub fn apply(ctx: &NemesisContext, fault: &PlannedFault) -> Option<Active> {
    let nodes = ctx.observations.nodes().to_vec();
    let leader = leader_now(ctx);
    let kind = faults::of(fault.template.kind);
    let ens = ensemble(ctx, &nodes);
    let resolved = kind.targets(&fault.template.target, ens, leader.as_deref(), fault.pick);
    let base = base_value(fault, &resolved);
    let order = Order {
        fault,
        ens,
        leader: leader.as_deref(),
        resolved: &resolved,
        base: &base,
    };
    match kind.apply(ctx, &order) {
        Ok(active) => Some(active),
        Err(e) => {
            let mut value = base.clone();
            value["error"] = json!(format!("{e:#}"));
            let f = fault.template.kind.f();
            ctx.recorder
                .record(NEMESIS, EventType::Fail, f, None, value);
            None
        }
    }
}

/// Undoes a fault (its kind's [`Fault::undo`]), recording it. Errors are recorded, never
/// raised: the run goes on.
pub fn undo(ctx: &NemesisContext, active: &Active) {
    active.undo(ctx)
}
