//! Packet faults: lost, delayed, duplicated, reordered or throttled packets on directed links
//! (iptables `statistic` in the fault's own chain `flc-packet-N`, an NFQUEUE engine of the
//! controller's in the node's namespace, or a `tbf` qdisc for bandwidth); undone by `heal`
//! (`undoes: "packet"`), which takes the rules and qdisc away before the engines release what
//! they hold.

use super::kill::undo_value;
use super::{Active, Fault, Needs, Order, SimWorld};
use crate::control::fault::packet::{self, engine::Engine, PacketMode, PacketRecord};
use crate::control::Net;
use crate::history::{sid_of, EventType, FaultKind, F, NEMESIS};
use crate::nemesis::partition::{groups_grudge, grudge};
use crate::nemesis::schedule::{Grudge, PartitionShape};
use crate::nemesis::seam::NemesisContext;
use crate::nemesis::targets::Ensemble;
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
