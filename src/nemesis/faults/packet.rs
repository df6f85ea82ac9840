//! Packet faults: lost, delayed, duplicated, reordered or throttled packets on directed links
//! (iptables `statistic` in the fault's own chain `flc-packet-N`, an NFQUEUE engine of the
//! controller's in the node's namespace, or a `tbf` qdisc for bandwidth); undone by `heal`
//! (`undoes: "packet"`), which takes the rules and qdisc away before the engines release what
//! they hold.

use super::kill::undo_value;
use super::partition::quoted_list;
use super::{
    names_its_nodes, target_line, Active, Fault, Needs, Order, RecordedStart, Replayed, SimWorld,
    StepKeys,
};
use crate::control::fault::packet::{self, engine::Engine, PacketMode, PacketRecord};
use crate::control::Net;
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::partition::{groups_grudge, grudge};
use crate::nemesis::raw_fault::RawFault;
use crate::nemesis::schedule::{FaultTemplate, Grudge, PartitionShape, PlannedFault, TargetSpec};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::targets::Ensemble;
use crate::nemesis::units::{parse_duration, parse_rate_kbit};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub struct Packet;

/// A packet fault's mode when the schedule names none.
const DEFAULT_MODE: PacketMode = PacketMode::Loss { percent: 30.0 };

/// What a packet fault in force on a real cluster keeps for its heal: its engines (delay,
/// duplicate, reorder), its chain and queue `slot`, and whether it put a root qdisc.
#[derive(Debug)]
struct Held {
    engines: Arc<Mutex<Vec<Engine>>>,
    slot: packet::Slot,
    qdisc: bool,
}

impl Fault for Packet {
    fn kind(&self) -> FaultKind {
        FaultKind::Packet
    }

    fn needs(&self) -> Needs {
        Needs {
            net: true,
            ..Needs::default()
        }
    }

    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active> {
        let Some(net) = ctx.control.net() else {
            bail!("packet faults need nodes with their own network stack (--net netns, or hosts over SSH)");
        };
        let t = &order.fault.template;
        let mode = t.packet.unwrap_or(DEFAULT_MODE);
        let nodes = order.ens.nodes;
        let named = t.groups.iter().flatten().flatten();
        let named = named.chain(t.drops.iter().flat_map(|g| {
            g.iter()
                .flat_map(|(to, froms)| std::iter::once(to).chain(froms))
        }));
        if let Some(unknown) = named.into_iter().find(|n| !nodes.contains(n)) {
            bail!("the links name {unknown}, which is not a node of this cluster");
        }
        let links = links_of(order);
        let mut value = order.base.clone();
        describe(&mut value, order, mode, &links);
        ctx.recorder
            .record(NEMESIS, EventType::Invoke, F::Packet, None, value.clone());
        let at = placed(mode, &links);
        let held = Held {
            engines: Arc::new(Mutex::new(Vec::new())),
            slot: packet::Slot::next(),
            qdisc: matches!(mode, PacketMode::Bandwidth { .. }),
        };
        let rules = install(ctx, net, &held, mode, &at, order.fault.pick)?;
        value["chain"] = json!(held.slot.chain());
        if mode.needs_engine() {
            value["queue"] = json!(held.slot.queue());
        }
        if held.qdisc {
            value["qdisc"] = json!(packet::QDISC);
        }
        value["rules"] = json!(rules);
        ctx.recorder
            .record(NEMESIS, EventType::Info, F::Packet, None, value);
        Ok(Active::new(self.kind(), at.keys().cloned().collect()).holding(held))
    }

    fn undo(&self, ctx: &NemesisContext, active: &Active) {
        let (Some(net), Some(held)) = (ctx.control.net(), active.held::<Held>()) else {
            return;
        };
        let engines = std::mem::take(&mut *held.engines.lock().unwrap());
        let chain = held.slot.chain();
        let what = packet::Heal::One {
            chain: &chain,
            qdisc: held.qdisc,
        };
        heal(ctx, net, &active.nodes, what, engines, false)
    }

    fn heal_all(&self, ctx: &NemesisContext, nodes: &[String]) {
        if let Some(net) = ctx.control.net() {
            heal(ctx, net, nodes, packet::Heal::All, Vec::new(), true);
        }
    }

    fn apply_sim(
        &self,
        w: &mut dyn SimWorld,
        order: &Order,
        id: u64,
        value: &mut Value,
    ) -> Vec<String> {
        let mode = order.fault.template.packet.unwrap_or(DEFAULT_MODE);
        let links = links_of(order);
        for (from, tos) in &links {
            for to in tos {
                if let (Some(a), Some(b)) = (sid_of(from), sid_of(to)) {
                    w.degrade(id, a, b, mode);
                }
            }
        }
        describe(value, order, mode, &links);
        placed(mode, &links).into_keys().collect()
    }

    fn undo_sim(&self, w: &mut dyn SimWorld, _: &[String], id: u64) {
        w.heal_links(id);
    }

    fn left_on(&self, ctx: &NemesisContext, node: &str) -> Vec<String> {
        let Some(net) = ctx.control.net() else {
            return Vec::new();
        };
        let in_netns = net.netns(node).is_some();
        match packet::leftovers(ctx.control.as_ref(), node, in_netns) {
            Ok(left) => left
                .into_iter()
                .map(|l| format!("{node} still has {l}"))
                .collect(),
            Err(e) => vec![format!("{node}: cannot list its packet faults: {e:#}")],
        }
    }

    fn cannot_simulate(&self, t: &FaultTemplate) -> Option<&'static str> {
        matches!(t.packet, Some(PacketMode::Bandwidth { .. }))
            .then_some("packet bandwidth (not simulated)")
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "shape", "mode", "percent", "delay", "jitter", "rate", "links",
        ]
    }

    /// Every link of every node, 30 % lost: a degraded network rather than a cut one.
    fn defaults(&self, t: &mut FaultTemplate) {
        t.target = TargetSpec::All;
        t.packet = Some(PacketMode::Loss { percent: 30.0 });
    }

    fn read_keys(&self, raw: &RawFault, t: &mut FaultTemplate) -> Result<(), String> {
        t.packet = Some(mode_of(raw)?);
        Ok(())
    }

    /// Its exact directed links (`links`), whose ends become its target; or named nodes.
    fn exact_step(&self, t: &mut FaultTemplate, step: &StepKeys) -> Result<(), String> {
        if let Some(links) = &step.links {
            if step.target_given || step.shape_given {
                return Err("links are the whole packet fault: leave out target and shape".into());
            }
            let mut ends: Vec<String> = links
                .iter()
                .flat_map(|(to, froms)| std::iter::once(to).chain(froms))
                .cloned()
                .collect();
            ends.sort_by_key(|n| sid_of(n));
            ends.dedup();
            t.target = TargetSpec::Nodes(ends);
            t.drops = Some(links.clone());
        }
        names_its_nodes(t)
    }

    fn step_lines(&self, s: &PlannedFault) -> String {
        let t = &s.template;
        let mut out = match &t.drops {
            Some(g) => {
                let pairs: Vec<String> = g
                    .iter()
                    .flat_map(|(to, froms)| {
                        froms.iter().map(move |from| [from.clone(), to.clone()])
                    })
                    .map(|pair| quoted_list(pair.iter()))
                    .collect();
                format!("links = [{}]\n", pairs.join(", "))
            }
            None => target_line(t),
        };
        if let Some(mode) = t.packet {
            out.push_str(&mode_keys(mode));
        }
        out
    }

    /// Exactly the mode and links it had, or no replay: another packet fault would replay a
    /// different run. One that degraded no link is not replayed.
    fn replayed(&self, mut t: FaultTemplate, start: &RecordedStart) -> Replayed {
        #[derive(serde::Deserialize)]
        struct Start {
            value: PacketRecord,
        }
        let Ok(Start { value: record }) = serde_json::from_str::<Start>(start.line) else {
            return Err(
                "does not record a mode and links that read back (a damaged or \
                        edited line), so it cannot be replayed as it was"
                    .into(),
            );
        };
        if record.links.is_empty() {
            return Ok(None);
        }
        t.packet = Some(record.mode);
        let mut g = Grudge::new();
        for [from, to] in &record.links {
            g.entry(to.clone()).or_default().insert(from.clone());
        }
        t.drops = Some(g);
        Ok(Some(t))
    }
}

/// A packet mode as the keys of a `[[fault]]` (what [`mode_of`] reads back to the same mode).
fn mode_keys(mode: PacketMode) -> String {
    let name = format!("mode = \"{}\"\n", mode.name());
    name + &match mode {
        PacketMode::Loss { percent } | PacketMode::Duplicate { percent } => {
            format!("percent = {percent:?}\n")
        }
        PacketMode::Delay {
            delay_ms,
            jitter_ms,
        } => format!("delay = \"{delay_ms}ms\"\njitter = \"{jitter_ms}ms\"\n"),
        PacketMode::Reorder { percent, delay_ms } => {
            format!("percent = {percent:?}\ndelay = \"{delay_ms}ms\"\n")
        }
        PacketMode::Bandwidth { rate_kbit } => format!("rate = \"{rate_kbit}kbit\"\n"),
    }
}

/// The order's links: its exact grudge or groups, else its shape's, else every link of a target.
fn links_of(order: &Order) -> BTreeMap<String, Vec<String>> {
    let t = &order.fault.template;
    let exact = (t.groups.as_deref(), t.drops.as_ref());
    links(t.shape, order.ens, order.nodes(), exact, order.fault.pick)
}

/// The packet fault's fields of its value: its mode and links, the shape it was drawn from and
/// the nodes at either end of a degraded link.
fn describe(
    value: &mut Value,
    order: &Order,
    mode: PacketMode,
    links: &BTreeMap<String, Vec<String>>,
) {
    let record = PacketRecord {
        mode,
        links: (links.iter())
            .flat_map(|(from, tos)| tos.iter().map(move |to| [from.clone(), to.clone()]))
            .collect(),
    };
    if let (Value::Object(fields), Some(v)) = (json!(record), value.as_object_mut()) {
        v.extend(fields);
    }
    if let Some(shape) = order.fault.template.shape {
        value["shape"] = json!(shape.name());
    }
    let mut ends: Vec<&String> = record.links.iter().flatten().collect();
    ends.sort_by_key(|n| sid_of(n));
    ends.dedup();
    value["nodes"] = json!(ends);
}

/// Where each link's fault is put: its sender, or its receiver for loss; node -> its peers.
fn placed(
    mode: PacketMode,
    links: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, Vec<String>> {
    let mut at: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (from, tos) in links {
        for to in tos {
            let (node, peer) = if mode.on_receiver() {
                (to, from)
            } else {
                (from, to)
            };
            at.entry(node.clone()).or_default().push(peer.clone());
        }
    }
    at
}

/// Puts the fault in place on each node of `at` (its engine first when the mode needs one),
/// each rule recorded before it exists; on an error, takes back what was put and says why.
fn install(
    ctx: &NemesisContext,
    net: &dyn Net,
    held: &Held,
    mode: PacketMode,
    at: &BTreeMap<String, Vec<String>>,
    pick: u64,
) -> Result<BTreeMap<String, Value>> {
    let mut rules = BTreeMap::new();
    // Nodes where this fault may have put something (a refused bandwidth fault has not).
    let mut touched: Vec<String> = Vec::new();
    let mut put = || -> Result<()> {
        for (i, (from, tos)) in at.iter().enumerate() {
            let netns = net.netns(from);
            if mode.needs_engine() {
                let Some(ns) = &netns else {
                    bail!(
                        "{} faults need the controller's packet engine in the node's namespace \
                         (--net netns on this machine); over SSH only loss works without netem",
                        mode.name()
                    );
                };
                let seed = pick.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64);
                let engine = Engine::start(from, ns, mode, seed, held.slot.queue())?;
                held.engines.lock().unwrap().push(engine);
            }
            // One root qdisc per interface: `install` refuses a second bandwidth fault, which
            // must not take the first one's qdisc with it.
            let refused =
                held.qdisc && netns.is_some() && packet::has_qdisc(ctx.control.as_ref(), from)?;
            if !refused {
                touched.push(from.clone());
            }
            let installed =
                packet::install(ctx.control.as_ref(), netns, from, &mode, tos, held.slot)?;
            rules.insert(from.clone(), json!(installed));
        }
        Ok(())
    };
    if let Err(e) = put() {
        let chain = held.slot.chain();
        let what = packet::Heal::One {
            chain: &chain,
            qdisc: held.qdisc,
        };
        let errors = unpacket(ctx, net, &touched, what);
        for engine in held.engines.lock().unwrap().drain(..) {
            engine.stop();
        }
        if !errors.is_empty() {
            return Err(e.context(format!("and taking it back left: {errors:?}")));
        }
        return Err(e);
    }
    Ok(rules)
}

/// The directed links (from -> the peers it sends to) a packet fault degrades: an exact grudge
/// (a replayed step's links) or a partition shape's cut links when given, else every link
/// from or to a target.
pub fn links(
    shape: Option<PartitionShape>,
    ens: Ensemble,
    targets: &[String],
    (groups, exact): (Option<&[Vec<String>]>, Option<&Grudge>),
    pick: u64,
) -> BTreeMap<String, Vec<String>> {
    let nodes = ens.nodes;
    let mut links: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let g = match (exact, groups, shape) {
        (Some(g), _, _) => Some(g.clone()),
        (None, Some(groups), _) => Some(groups_grudge(nodes, groups)),
        (None, None, Some(shape)) => Some(grudge(shape, ens, targets, pick)),
        (None, None, None) => None,
    };
    match g {
        // A grudge says who drops whose packets: `to` drops `from`, so the link is from -> to.
        Some(g) => {
            for (to, froms) in &g {
                for from in froms {
                    links.entry(from.clone()).or_default().push(to.clone());
                }
            }
        }
        None => {
            for from in nodes {
                for to in nodes {
                    if from != to && (targets.contains(from) || targets.contains(to)) {
                        links.entry(from.clone()).or_default().push(to.clone());
                    }
                }
            }
        }
    }
    for peers in links.values_mut() {
        peers.sort_by_key(|n| sid_of(n));
        peers.dedup();
    }
    links
}

/// Removes packet faults (`what`) from `nodes`; returns the nodes where something is still there.
fn unpacket(
    ctx: &NemesisContext,
    net: &dyn Net,
    nodes: &[String],
    what: packet::Heal,
) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for node in nodes {
        let in_netns = net.netns(node).is_some();
        if let Err(e) = packet::heal(ctx.control.as_ref(), node, in_netns, what) {
            errors.insert(node.clone(), format!("{e:#}"));
        }
    }
    errors
}

/// Ends packet faults (`what`: one fault's, or all) on `nodes` and records it as a `heal` with
/// `undoes: "packet"`: the rules and qdisc go first (no new packet is queued), then the engines
/// release what they hold; the value says what each engine did.
fn heal(
    ctx: &NemesisContext,
    net: &dyn Net,
    nodes: &[String],
    what: packet::Heal,
    engines: Vec<Engine>,
    last: bool,
) {
    let chain = match what {
        packet::Heal::One { chain, .. } => chain.to_string(),
        packet::Heal::All => format!("{}*", packet::CHAIN),
    };
    let mut value = undo_value(FaultKind::Packet, nodes);
    value["chain"] = json!(chain);
    if last {
        value["final"] = json!(true);
    }
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, F::Heal, None, value.clone());
    let errors = unpacket(ctx, net, nodes, what);
    let stats: BTreeMap<String, _> = (engines.into_iter())
        .map(|e| (e.node().to_string(), e.stop()))
        .collect();
    if !stats.is_empty() {
        value["engines"] = json!(stats);
    }
    let kind = if errors.is_empty() {
        EventType::Info
    } else {
        value["errors"] = json!(errors);
        EventType::Fail
    };
    ctx.recorder.record(NEMESIS, kind, F::Heal, None, value);
}

/// The packet mode a `[[fault]]` table's keys set (loss of 30 % when it sets none); each
/// value checked, a key its mode does not use refused.
fn mode_of(raw: &RawFault) -> Result<PacketMode, String> {
    let mode = raw.mode.as_deref().unwrap_or("loss");
    let percent = |default: f64| -> Result<f64, String> {
        let p = raw.percent.unwrap_or(default);
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!(
                "percent = {p}: use a number above 0 and at most 100"
            ));
        }
        Ok(p)
    };
    let ms = |key: &str, value: &Option<String>, default: &str| -> Result<u64, String> {
        let d = parse_duration(value.as_deref().unwrap_or(default))
            .map_err(|e| format!("{key}: {e}"))?;
        Ok(d.as_millis() as u64)
    };
    let unused = |keys: &[(&str, bool)]| -> Result<(), String> {
        match keys.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(format!("{key} does not apply to mode = \"{mode}\"")),
            None => Ok(()),
        }
    };
    let (percent_set, delay_set) = (raw.percent.is_some(), raw.delay.is_some());
    let (jitter_set, rate_set) = (raw.jitter.is_some(), raw.rate.is_some());
    let m = match mode {
        "loss" => {
            unused(&[
                ("delay", delay_set),
                ("jitter", jitter_set),
                ("rate", rate_set),
            ])?;
            PacketMode::Loss {
                percent: percent(30.0)?,
            }
        }
        "delay" => {
            unused(&[("percent", percent_set), ("rate", rate_set)])?;
            let delay_ms = ms("delay", &raw.delay, "100ms")?;
            let jitter_ms = ms("jitter", &raw.jitter, "0ms")?;
            if delay_ms == 0 || jitter_ms > delay_ms {
                return Err(format!(
                    "delay {delay_ms} ms, jitter {jitter_ms} ms: use a delay above 0 and a \
                     jitter at most the delay"
                ));
            }
            PacketMode::Delay {
                delay_ms,
                jitter_ms,
            }
        }
        "duplicate" => {
            unused(&[
                ("delay", delay_set),
                ("jitter", jitter_set),
                ("rate", rate_set),
            ])?;
            PacketMode::Duplicate {
                percent: percent(20.0)?,
            }
        }
        "reorder" => {
            unused(&[("jitter", jitter_set), ("rate", rate_set)])?;
            let delay_ms = ms("delay", &raw.delay, "50ms")?;
            if delay_ms == 0 {
                return Err("delay = 0: a reordered packet must wait; use e.g. 50ms".into());
            }
            PacketMode::Reorder {
                percent: percent(25.0)?,
                delay_ms,
            }
        }
        "bandwidth" => {
            unused(&[
                ("percent", percent_set),
                ("delay", delay_set),
                ("jitter", jitter_set),
            ])?;
            let text = raw.rate.as_deref().unwrap_or("1mbit");
            PacketMode::Bandwidth {
                rate_kbit: parse_rate_kbit(text).map_err(|e| format!("rate: {e}"))?,
            }
        }
        other => {
            return Err(format!(
                "mode = \"{other}\" is unknown for kind = \"packet\"; use loss, delay, \
                 duplicate, reorder or bandwidth"
            ))
        }
    };
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    #[test]
    fn without_a_shape_every_link_of_the_targets_is_hit() {
        let all = nodes(3);
        let links = super::links(None, Ensemble::voting(&all), &all, (None, None), 0);
        assert_eq!(links.values().map(Vec::len).sum::<usize>(), 6);
        let one = super::links(
            None,
            Ensemble::voting(&all),
            &["n2".to_string()],
            (None, None),
            0,
        );
        // n2 -> n1, n2 -> n3, n1 -> n2, n3 -> n2.
        assert_eq!(one["n2"], vec!["n1", "n3"]);
        assert_eq!(one["n1"], vec!["n2"]);
        assert_eq!(one["n3"], vec!["n2"]);
    }

    #[test]
    fn a_shape_hits_exactly_the_links_its_partition_would_cut() {
        let all = nodes(3);
        let links = super::links(
            Some(PartitionShape::OneWay),
            Ensemble::voting(&all),
            &["n1".to_string()],
            (None, None),
            0,
        );
        // One-way from n1: only n1's packets to the others.
        assert_eq!(links.len(), 1, "{links:?}");
        assert_eq!(links["n1"], vec!["n2", "n3"]);
    }

    #[test]
    fn an_exact_grudge_hits_exactly_its_links_whatever_the_shape() {
        let all = nodes(3);
        // n2 and n3 lose what n1 sends them: the links n1 -> n2 and n1 -> n3.
        let g: Grudge = [("n2", "n1"), ("n3", "n1")]
            .iter()
            .map(|(to, from)| (to.to_string(), [from.to_string()].into()))
            .collect();
        let links = super::links(
            Some(PartitionShape::Halves),
            Ensemble::voting(&all),
            &all,
            (None, Some(&g)),
            7,
        );
        assert_eq!(links.len(), 1, "{links:?}");
        assert_eq!(links["n1"], vec!["n2", "n3"]);
    }
}
