//! Frames: garbage or truncated frames written to a node's election port by the controller,
//! as a peer that names itself with a larger sid (`control::fault::frames`). Done at once; its
//! `heal` (`undoes: "frames"`) only closes its record. The simulator cannot model it (its
//! messages are values, not bytes) and refuses it before a run.

use super::kill::undo_value;
use super::{
    record_outcome, record_undo, single, target_line, Active, Fault, Order, RecordedStart,
    Replayed, SimWorld,
};
use crate::control::fault::frames;
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{FaultTemplate, FrameMode, PlannedFault, TargetSpec};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::targets::{drawn, resolve, Ensemble, Resolved};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub struct Frames;

impl Fault for Frames {
    fn kind(&self) -> FaultKind {
        FaultKind::Frames
    }

    /// A server keeps only the election connections a larger sid dialed, so the largest sid is
    /// left out of the drawn targets (leader, trigger and named nodes are kept, and refused
    /// with the reason at apply). A minority is drawn among the followers: what the next
    /// election needs is voters that cannot hear.
    fn targets(
        &self,
        spec: &TargetSpec,
        ens: Ensemble,
        leader: Option<&str>,
        pick: u64,
    ) -> Resolved {
        let nodes = ens.nodes;
        let largest = resolve(&TargetSpec::Highest, ens, leader, pick).nodes.pop();
        let smaller: Vec<String> = (nodes.iter())
            .filter(|n| Some(*n) != largest.as_ref())
            .cloned()
            .collect();
        let n = nodes.len();
        match spec {
            TargetSpec::Leader | TargetSpec::Trigger | TargetSpec::Nodes(_) => {
                resolve(spec, ens, leader, pick)
            }
            _ if smaller.is_empty() => resolve(spec, ens, leader, pick),
            TargetSpec::Minority => {
                let followers: Vec<String> = (smaller.iter())
                    .filter(|x| Some(x.as_str()) != leader)
                    .cloned()
                    .collect();
                drawn(followers, n - crate::api::quorum(n), pick)
            }
            TargetSpec::Majority => drawn(smaller, crate::api::quorum(n), pick),
            _ => {
                let ens = Ensemble {
                    nodes: &smaller,
                    ..ens
                };
                resolve(spec, ens, leader, pick)
            }
        }
    }

    /// For each node, the controller dials its election port as the largest larger sid and
    /// writes the mode's bytes (seeded), then hangs up; the value says per node the sid used,
    /// the seed and the bytes sent.
    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let (f, nodes) = (F::Frames, order.nodes());
        let mode = order.fault.template.frames.unwrap_or(FrameMode::Truncated);
        let mut value = order.base.clone();
        value["mode"] = json!(mode.name());
        ctx.recorder
            .record(NEMESIS, EventType::Invoke, f, single(nodes), value.clone());
        let (mut sent, mut errors) = (BTreeMap::new(), BTreeMap::new());
        for (i, node) in nodes.iter().enumerate() {
            match send(ctx, order.ens.nodes, node, mode, order.fault.node_seed(i)) {
                Ok(s) => {
                    sent.insert(node.clone(), json!(s));
                }
                Err(e) => {
                    errors.insert(node.clone(), format!("{e:#}"));
                }
            }
        }
        value["sent"] = json!(sent);
        let done = (!sent.is_empty(), "no frame was written");
        record_outcome(ctx, (f, nodes), value, errors, done)?;
        Ok(Active::new(self.kind(), sent.keys().cloned().collect()))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        let nodes = &active.nodes;
        let value = undo_value(self.kind(), nodes);
        record_undo(ctx, F::Heal, single(nodes), value, false, BTreeMap::new);
    }

    /// Refused before a simulated run (`commands::sim::cli::cannot_model`): nothing is done.
    fn apply_sim(&self, _: &mut dyn SimWorld, _: &Order, _: u64, _: &mut Value) -> Vec<String> {
        Vec::new()
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, _: &[String], id: u64) {
        w.heal_links(id);
    }

    fn cannot_simulate(&self, _: &FaultTemplate) -> Option<&'static str> {
        Some("frames (the simulator runs no election wire decoder)")
    }

    fn keys(&self) -> &'static [&'static str] {
        &["mode"]
    }

    /// A follower, sent truncated frames: a deaf follower is what the next election needs.
    fn defaults(&self, t: &mut FaultTemplate) {
        t.target = TargetSpec::Follower;
        t.frames = Some(FrameMode::Truncated);
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(m) = &raw.mode {
            t.frames = Some(FrameMode::parse(m).ok_or_else(|| {
                format!("mode = \"{m}\" is unknown for kind = \"frames\"; use truncated or garbage")
            })?);
        }
        Ok(())
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let mut out = target_line(&s.template);
        if let Some(mode) = s.template.frames {
            out.push_str(&format!("mode = \"{}\"\n", mode.name()));
        }
        out
    }

    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        let recorded = start.value.mode.as_deref().and_then(FrameMode::parse);
        t.frames = recorded.or(t.frames);
        Ok(Some(t))
    }
}

/// Writes `mode`'s frames to `node` as the largest sid above its own among `all`.
fn send(
    ctx: &NemesisContext,
    all: &[String],
    node: &str,
    mode: FrameMode,
    seed: u64,
) -> Result<frames::Sent> {
    let sids: Vec<u64> = all.iter().filter_map(|n| sid_of(n)).collect();
    let sid = sid_of(node).ok_or_else(|| anyhow!("no sid"))?;
    let Some(as_sid) = frames::impersonate(sid, &sids) else {
        bail!(
            "{node} has the largest sid: a server keeps no election connection another server \
             dialed, so nothing can be written to it as a peer"
        );
    };
    let as_node = (all.iter())
        .find(|n| sid_of(n) == Some(as_sid))
        .ok_or_else(|| anyhow!("no node with sid {as_sid}"))?;
    let unknown = |n: &str| anyhow!("{n}'s election port is not known to the controller");
    let to = ctx
        .target
        .election_addr(node)
        .ok_or_else(|| unknown(node))?;
    let as_addr = (ctx.target.election_addr(as_node)).ok_or_else(|| unknown(as_node))?;
    frames::send(to, as_sid, as_addr, mode, seed)
}
