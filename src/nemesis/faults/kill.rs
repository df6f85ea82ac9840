//! Kill: SIGKILL to the target nodes; undone by `start`. Its undo restarts only what it
//! killed: a node already down (another part of a composition killed it) comes back with that
//! part's undo.

use super::{
    signal_all, sim_running, sim_start_again, start_again, Active, Fault, Order, RecordedStart,
    Replayed, SimWorld,
};
use crate::history::{sid_of, FaultKind, FaultValue, F};
use crate::nemesis::schedule::FaultTemplate;
use crate::nemesis::seam::NemesisContext;
use anyhow::Result;
use serde_json::Value;

pub struct Kill;

impl Fault for Kill {
    fn kind(&self) -> FaultKind {
        FaultKind::Kill
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let up: Vec<String> = (order.nodes().iter())
            .filter(|n| ctx.target.is_running(n))
            .cloned()
            .collect();
        signal_all(ctx, order.nodes(), F::Kill, order.base, |n| {
            ctx.target.kill(n)
        })?;
        Ok(Active::new(FaultKind::Kill, up))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        start_again(ctx, &active.nodes, &undo_value(self.kind(), &active.nodes));
    }

    fn apply_sim(&self, w: &mut dyn SimWorld, order: &Order, _: u64, _: &mut Value) -> Vec<String> {
        let hit = sim_running(w, order.nodes());
        for s in hit.iter().filter_map(|n| sid_of(n)) {
            w.kill(s);
        }
        hit
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], _: u64) {
        sim_start_again(w, nodes);
    }

    /// Not a reconfig's replace: its reconfig step replays that kill.
    fn replayed(&self, t: FaultTemplate, start: &RecordedStart) -> Replayed {
        Ok((!start.value.made_by_replace(F::Kill)).then_some(t))
    }
}

/// The recorded value of `kind`'s undo on `nodes` (not the final heal's).
pub(crate) fn undo_value(kind: FaultKind, nodes: &[String]) -> Value {
    FaultValue::undo(kind, nodes, false).to_json()
}

/// The final heal of the kinds that stop nodes: each node not running is started again, one
/// at a time (not marked final: the other kinds' own heals are).
pub(crate) fn start_down_nodes(ctx: &NemesisContext, nodes: &[String]) {
    for node in nodes {
        if !ctx.target.is_running(node) {
            let one = std::slice::from_ref(node);
            start_again(ctx, one, &undo_value(FaultKind::Kill, one));
        }
    }
}
