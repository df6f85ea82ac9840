//! Pause: SIGSTOP to the target nodes (the process keeps its sockets, its peers time out);
//! undone by `resume` (SIGCONT).

use super::kill::undo_value;
use super::{signal_all, Active, Fault, Life, Order, SimWorld};
use crate::history::{sid_of, FaultKind, F};
use crate::nemesis::seam::NemesisContext;
use anyhow::Result;
use serde_json::Value;

pub struct Pause;

impl Fault for Pause {
    fn kind(&self) -> FaultKind {
        FaultKind::Pause
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        signal_all(ctx, order.nodes(), F::Pause, order.base, |n| {
            ctx.target.pause(n)
        })?;
        Ok(Active::new(FaultKind::Pause, order.nodes().to_vec()))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        let value = undo_value(self.kind(), &active.nodes);
        let _ = signal_all(ctx, &active.nodes, F::Resume, &value, |n| {
            ctx.target.resume(n)
        });
    }

    fn apply_sim(&self, w: &mut dyn SimWorld, order: &Order, _: u64, _: &mut Value) -> Vec<String> {
        let up = |n: &&String| sid_of(n).is_some_and(|s| w.life(s) == Life::Up);
        let hit: Vec<String> = order.nodes().iter().filter(up).cloned().collect();
        for s in hit.iter().filter_map(|n| sid_of(n)) {
            w.pause(s);
        }
        hit
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], _: u64) {
        for s in nodes.iter().filter_map(|n| sid_of(n)) {
            if w.life(s) == Life::Paused {
                w.resume(s);
            }
        }
    }
}
