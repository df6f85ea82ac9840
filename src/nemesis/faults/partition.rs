//! Partition: iptables rules (the tool's `flc` chain) make nodes drop what others send, in a
//! named shape, given groups or an exact grudge (a replayed step's); every packet, or only the
//! Zab connections' (`cut = "quorum"`). Undone by `heal`, which removes the chain.

use super::kill::undo_value;
use super::{
    names_its_nodes, record_undo, target_line, Active, Fault, Needs, Order, RecordedStart,
    Replayed, SimWorld, StepKeys,
};
use crate::control::{fault::iptables, Net};
use crate::history::situation::Who;
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::partition::{components, groups_grudge, grudge};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{FaultTemplate, Grudge, PartitionShape, PlannedFault, TargetSpec};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::targets::resolve;
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub struct Partition;

impl Fault for Partition {
    fn kind(&self) -> FaultKind {
        FaultKind::Partition
    }

    /// The leader when its shape is drawn around the leader; else nobody in particular
    /// (its target only seeds the draw).
    fn whom(&self, t: &FaultTemplate) -> Option<Who> {
        match t.shape {
            Some(PartitionShape::IsolateLeader | PartitionShape::LeaderMinority) => {
                Some(Who::Leader)
            }
            _ => None,
        }
    }

    fn needs(&self) -> Needs {
        Needs {
            net: true,
            ..Needs::default()
        }
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let Some(net) = ctx.control.net() else {
            bail!("partitions need nodes with their own network stack (--net netns, or hosts over SSH)");
        };
        let g = checked_grudge(order)?;
        let mut value = order.base.clone();
        describe(&mut value, order, &g);
        ctx.recorder.record(
            NEMESIS,
            EventType::Invoke,
            F::Partition,
            None,
            value.clone(),
        );
        let rules = cut(net, &g, order.fault.template.cut)?;
        value["chain"] = json!(iptables::CHAIN);
        value["rules"] = json!(rules);
        ctx.recorder
            .record(NEMESIS, EventType::Info, F::Partition, None, value);
        Ok(Active::new(self.kind(), g.keys().cloned().collect()))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        // A partition was only made through the cluster's `Net`, so it is there.
        if let Some(net) = ctx.control.net() {
            heal(ctx, net, &active.nodes, false)
        }
    }

    fn heal_all(&self, ctx: &NemesisContext, nodes: &[String]) {
        if let Some(net) = ctx.control.net() {
            heal(ctx, net, nodes, true);
        }
    }

    fn apply_sim(
        &self,
        w: &mut dyn SimWorld,
        order: &Order,
        id: u64,
        value: &mut Value,
    ) -> Vec<String> {
        let g = the_grudge(order);
        let quorum_only = order.fault.template.cut == iptables::Cut::Quorum;
        for (a, froms) in &g {
            for b in froms {
                if let (Some(a), Some(b)) = (sid_of(a), sid_of(b)) {
                    w.cut(id, b, a, quorum_only);
                }
            }
        }
        describe(value, order, &g);
        g.keys().cloned().collect()
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, _: &[String], id: u64) {
        w.heal_links(id);
    }

    fn left_on(&self, ctx: &NemesisContext, node: &str) -> Vec<String> {
        let Some(net) = ctx.control.net() else {
            return Vec::new();
        };
        match net.is_cut(node) {
            Ok(true) => vec![format!("{node} still has the {} chain", iptables::CHAIN)],
            Ok(false) => Vec::new(),
            Err(e) => vec![format!("{node}: cannot list its iptables rules: {e:#}")],
        }
    }

    fn keys(&self) -> &'static [&'static str] {
        &["shape", "port", "drops"]
    }

    fn defaults(&self, t: &mut FaultTemplate) {
        t.shape = Some(PartitionShape::RandomHalves);
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        if let Some(port) = &raw.port {
            t.cut = iptables::Cut::of_port(Some(port)).ok_or_else(|| {
                format!(
                    "port = \"{port}\" is unknown; use \"quorum\" (only the Zab connections are \
                     cut) or leave it out (every packet)"
                )
            })?;
        }
        Ok(())
    }

    /// Exact groups or drops, or a shape that needs no draw and no role; the nodes it cuts
    /// become its target, as the history records them.
    fn exact_step(&self, t: &mut FaultTemplate, step: &StepKeys) -> Result<(), String> {
        if step.target_given {
            names_its_nodes(t)?;
        }
        is_exact(t, step.drops.is_some(), step.shape_given)?;
        let mut named: Vec<String> = match (&step.drops, &t.groups) {
            (Some(d), _) => d
                .iter()
                .flat_map(|(a, f)| std::iter::once(a).chain(f))
                .cloned()
                .collect(),
            (None, Some(g)) => g.iter().flatten().cloned().collect(),
            (None, None) => Vec::new(),
        };
        if !named.is_empty() {
            named.sort_by_key(|n| sid_of(n));
            named.dedup();
            t.target = TargetSpec::Nodes(named);
        }
        t.drops = step.drops.clone();
        Ok(())
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let t = &s.template;
        let mut out = match (&t.drops, &t.groups) {
            (Some(d), _) => {
                let entries: Vec<String> = d
                    .iter()
                    .map(|(n, from)| format!("{n} = {}", quoted_list(from.iter())))
                    .collect();
                format!("drops = {{ {} }}\n", entries.join(", "))
            }
            (None, Some(g)) => {
                let groups: Vec<String> = g.iter().map(|g| quoted_list(g.iter())).collect();
                format!("groups = [{}]\n", groups.join(", "))
            }
            (None, None) => {
                let shape = t.shape.unwrap_or(PartitionShape::Halves);
                format!("shape = \"{}\"\n{}", shape.name(), target_line(t))
            }
        };
        if let Some(port) = t.cut.port() {
            out.push_str(&format!("port = \"{port}\"\n"));
        }
        out
    }

    /// Who dropped whom, as groups when groups say it exactly, else as drops.
    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        let g: Grudge = (start.value.drops.iter())
            .map(|(n, from)| (n.clone(), from.iter().cloned().collect()))
            .collect();
        let comps = components(start.nodes, &g);
        t.cut = iptables::Cut::of_port(start.value.port.as_deref()).unwrap_or(iptables::Cut::Every);
        if groups_grudge(start.nodes, &comps) == g {
            t.shape = Some(PartitionShape::Groups);
            t.groups = Some(comps);
        } else {
            t.drops = Some(g);
        }
        Ok(Some(t))
    }
}

/// `["n1", "n2"]`.
pub(crate) fn quoted_list<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let q: Vec<String> = items.map(|n| format!("{n:?}")).collect();
    format!("[{}]", q.join(", "))
}

/// A partition step must cut exactly the same way every time: explicit groups or drops, or a
/// shape that needs no random draw and no role.
fn is_exact(t: &FaultTemplate, drops: bool, shape_given: bool) -> Result<(), String> {
    if drops {
        if shape_given || t.groups.is_some() {
            return Err("drops is the whole partition: leave out shape and groups".into());
        }
        return Ok(());
    }
    match (t.shape, &t.target) {
        (Some(PartitionShape::Groups | PartitionShape::Halves), _) => Ok(()),
        (Some(PartitionShape::IsolateOne | PartitionShape::OneWay), TargetSpec::Nodes(n))
            if n.len() == 1 =>
        {
            Ok(())
        }
        (Some(PartitionShape::IsolateOne | PartitionShape::OneWay), _) => {
            Err("shape isolate-one and one-way need target = one node, e.g. \"n2\"".into())
        }
        _ => Err(
            "a partition step needs groups = [[\"n1\", \"n2\"], [\"n3\"]], or drops = { n1 = \
             [\"n3\"] } (node = the nodes whose traffic it drops), or shape = \"halves\" / \
             \"isolate-one\" / \"one-way\" with a target; random shapes are not exact"
                .into(),
        ),
    }
}

/// The nodes a shape is drawn around: the leader for the leader's shapes, else the target.
fn shape_targets(order: &Order, shape: PartitionShape) -> Vec<String> {
    match shape {
        PartitionShape::IsolateLeader | PartitionShape::LeaderMinority => {
            resolve(
                &TargetSpec::Leader,
                order.ens,
                order.leader,
                order.fault.pick,
            )
            .nodes
        }
        _ => order.nodes().to_vec(),
    }
}

/// The shape the fault draws (random halves when none is named).
fn shape(order: &Order) -> PartitionShape {
    order
        .fault
        .template
        .shape
        .unwrap_or(PartitionShape::RandomHalves)
}

/// Who drops whom: a timed step's exact grudge, the given groups, or the shape's draw.
fn the_grudge(order: &Order) -> Grudge {
    let t = &order.fault.template;
    match (&t.drops, &t.groups) {
        (Some(d), _) => d.clone(),
        (None, Some(groups)) => groups_grudge(order.ens.nodes, groups),
        (None, None) => grudge(
            shape(order),
            order.ens,
            &shape_targets(order, shape(order)),
            order.fault.pick,
        ),
    }
}

/// [`the_grudge`], refused when it names a node the cluster does not have.
fn checked_grudge(order: &Order) -> Result<Grudge> {
    let t = &order.fault.template;
    let nodes = order.ens.nodes;
    let named: Vec<&String> = match (&t.drops, &t.groups) {
        (Some(d), _) => d
            .iter()
            .flat_map(|(a, from)| std::iter::once(a).chain(from))
            .collect(),
        (None, Some(groups)) => groups.iter().flatten().collect(),
        (None, None) => Vec::new(),
    };
    if let Some(unknown) = named.into_iter().find(|n| !nodes.contains(n)) {
        let what = if t.drops.is_some() { "drops" } else { "groups" };
        bail!("{what} name {unknown}, which is not a node of this cluster");
    }
    Ok(the_grudge(order))
}

/// The partition's fields of its value: its shape, the nodes that drop, who drops whom, the
/// components, and `port` when only the Zab connections are cut.
fn describe(value: &mut Value, order: &Order, g: &Grudge) {
    let t = &order.fault.template;
    // An exact grudge is no named shape.
    value["shape"] = json!(if t.drops.is_some() {
        "drops"
    } else {
        shape(order).name()
    });
    value["nodes"] = json!(g.keys().collect::<Vec<_>>());
    value["drops"] = json!(g);
    value["components"] = json!(components(order.ens.nodes, g));
    if let Some(port) = t.cut.port() {
        // Additive history field: only the Zab connections were cut.
        value["port"] = json!(port);
    }
}

/// Installs the grudge's cuts (every packet, or only the Zab connections'), each recorded
/// before it exists; returns the rules per node as text.
pub fn cut(net: &dyn Net, g: &Grudge, how: iptables::Cut) -> Result<BTreeMap<String, Vec<String>>> {
    let mut rules = BTreeMap::new();
    for (node, sources) in g {
        let sources: Vec<String> = sources.iter().cloned().collect();
        rules.insert(node.clone(), net.drop_from(node, &sources, how)?);
    }
    Ok(rules)
}

/// Removes the cuts from `nodes`; returns the nodes where they could not be removed.
pub fn uncut(net: &dyn Net, nodes: &[String]) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for node in nodes {
        if let Err(e) = net.heal(node) {
            errors.insert(node.clone(), format!("{e:#}"));
        }
    }
    errors
}

/// Removes the tool's chain from `nodes` and records the heal.
pub fn heal(ctx: &NemesisContext, net: &dyn Net, nodes: &[String], last: bool) {
    let mut value = undo_value(FaultKind::Partition, nodes);
    value["chain"] = json!(iptables::CHAIN);
    record_undo(ctx, F::Heal, None, value, last, || uncut(net, nodes));
}
