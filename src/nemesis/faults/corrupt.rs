//! File corruption: each target node is SIGKILLed, then its data file (`file`, the txnlog by
//! default) is damaged at a seeded place (bits flipped, a block zeroed, or cut short); undone
//! by `start` on the damaged file (`undoes: "corrupt"`). The value says the file, what, where
//! and how long, and why a killed node's file could not be damaged (`errors`).

use super::kill::undo_value;
use super::{
    insert, record_outcome, sim_start_again, single, start_again, target_line, Active, Fault, Life,
    Order, RecordedStart, Replayed, SimWorld,
};
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{FaultTemplate, PlannedFault, CORRUPT_FILES};
use crate::nemesis::seam::NemesisContext;
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub struct Corrupt;

/// The file damaged when the schedule names none.
const DEFAULT_FILE: &str = "txnlog";

impl Fault for Corrupt {
    fn kind(&self) -> FaultKind {
        FaultKind::Corrupt
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let (f, nodes, base) = (F::Corrupt, order.nodes(), order.base);
        let file = file_of(&order.fault.template);
        ctx.recorder
            .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
        let (mut pids, mut done, mut errors) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for (i, node) in nodes.iter().enumerate() {
            let seed = order.fault.node_seed(i);
            match ctx.target.kill(node) {
                Ok(pid) => {
                    pids.insert(node.clone(), json!(pid));
                }
                Err(e) => {
                    errors.insert(node.clone(), format!("{e:#}"));
                    continue;
                }
            }
            // A node killed but not damaged (its file not written yet) still restarts at the
            // undo.
            match ctx.target.corrupt_file(node, file, seed) {
                Ok(damage) => {
                    done.insert(node.clone(), json!(damage));
                }
                Err(e) => {
                    errors.insert(node.clone(), format!("{e:#}"));
                }
            }
        }
        let mut value = base.clone();
        value["file"] = json!(file);
        value["pids"] = json!(pids);
        value["damage"] = json!(done);
        let done = (!pids.is_empty(), "no node was stopped to damage its file");
        record_outcome(ctx, (f, nodes), value, errors, done)?;
        Ok(Active::new(self.kind(), pids.keys().cloned().collect()))
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
        let (mut hit, mut damage, mut errors) = (Vec::new(), Map::new(), Map::new());
        // The index among the named nodes seeds a corruption, as on real nodes.
        let sids: Vec<u64> = order.nodes().iter().filter_map(|n| sid_of(n)).collect();
        for (i, s) in sids.into_iter().enumerate() {
            if w.life(s) == Life::Down {
                continue;
            }
            hit.push(crate::history::node_name(s));
            w.kill(s);
            match w.corrupt(s, order.fault.node_seed(i)) {
                Some(Ok(d)) => insert(&mut damage, s, d),
                Some(Err(why)) => insert(&mut errors, s, json!(why)),
                None => {}
            }
        }
        value["file"] = json!(file_of(&order.fault.template));
        value["damage"] = Value::Object(damage);
        if !errors.is_empty() {
            value["errors"] = Value::Object(errors);
        }
        hit
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], _: u64) {
        sim_start_again(w, nodes);
    }

    fn cannot_simulate(&self, t: &FaultTemplate) -> Option<&'static str> {
        (file_of(t) != DEFAULT_FILE).then_some(
            "corrupt of an epoch file (a damaged epoch file makes fle-node refuse to start, \
             which the simulator does not model)",
        )
    }

    fn keys(&self) -> &'static [&'static str] {
        &["file"]
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(file) = &raw.file {
            if !CORRUPT_FILES.contains(&file.as_str()) {
                return Err(format!(
                    "file = \"{file}\" is unknown; use one of {}",
                    CORRUPT_FILES.join(", ")
                ));
            }
            t.file = Some(file.clone());
        }
        Ok(())
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let mut out = target_line(&s.template);
        if let Some(file) = &s.template.file {
            out.push_str(&format!("file = \"{file}\"\n"));
        }
        out
    }

    /// The file its start damaged (runs that did not record it: the txnlog, the default).
    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        t.file = start.value.file.clone();
        Ok(Some(t))
    }
}

/// The file a corrupt fault damages.
fn file_of(t: &FaultTemplate) -> &str {
    t.file.as_deref().unwrap_or(DEFAULT_FILE)
}
