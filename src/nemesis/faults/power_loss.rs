//! Power loss: each target node is SIGKILLed, then its filesystem forgets every write not yet
//! fsynced (the last one torn at a seeded byte; lazyfs on real nodes); undone by `start`
//! (`undoes: "power-loss"`). The value says exactly what each node lost.

use super::kill::undo_value;
use super::{
    insert, record_outcome, sim_start_again, single, start_again, Active, Fault, Life, Needs,
    Order, SimWorld,
};
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::seam::NemesisContext;
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub struct PowerLoss;

impl Fault for PowerLoss {
    fn kind(&self) -> FaultKind {
        FaultKind::PowerLoss
    }

    fn needs(&self) -> Needs {
        Needs {
            fuse: true,
            ..Needs::default()
        }
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let (f, nodes, base) = (F::PowerLoss, order.nodes(), order.base);
        ctx.recorder
            .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
        let (mut pids, mut lost, mut errors) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for (i, node) in nodes.iter().enumerate() {
            let tear = order.fault.pick.wrapping_mul(31).wrapping_add(i as u64);
            let killed = ctx.target.kill(node);
            match killed.and_then(|pid| Ok((pid, ctx.target.power_loss(node, Some(tear))?))) {
                Ok((pid, report)) => {
                    pids.insert(node.clone(), json!(pid));
                    lost.insert(node.clone(), json!(report));
                }
                Err(e) => {
                    errors.insert(node.clone(), format!("{e:#}"));
                }
            }
        }
        let mut value = base.clone();
        value["pids"] = json!(pids);
        value["lost"] = json!(lost);
        let done = (!lost.is_empty(), "no node lost power");
        record_outcome(ctx, (f, nodes), value, errors, done)?;
        Ok(Active::new(self.kind(), lost.keys().cloned().collect()))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        start_again(ctx, &active.nodes, &undo_value(self.kind(), &active.nodes));
    }

    fn apply_sim(
        &self,
        w: &mut dyn SimWorld,
        order: &Order,
        _: u64,
        value: &mut Value,
    ) -> Vec<String> {
        let mut hit = Vec::new();
        let mut lost = Map::new();
        for s in order.nodes().iter().filter_map(|n| sid_of(n)) {
            if w.life(s) == Life::Down {
                continue;
            }
            hit.push(crate::history::node_name(s));
            w.kill(s);
            if let Some(n) = w.lose_power(s) {
                insert(&mut lost, s, json!({ "lost_bytes": n }));
            }
        }
        value["lost"] = Value::Object(lost);
        hit
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], _: u64) {
        sim_start_again(w, nodes);
    }
}
