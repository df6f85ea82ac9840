//! Doing and undoing one fault on a live cluster, and recording both in the history.
//!
//! Every action is an `invoke` then an `info` (done, saying exactly what: nodes, pids, rules,
//! offsets) or a `fail` (it could not be done), as the history conventions require. An applied
//! fault returns an `Active` that knows how to undo itself.
//!
//! What a cluster can do comes from its capabilities, never from its backend's name: a
//! partition needs `Control::net`, a clock fault `Target::clock`; without them the fault is
//! recorded as `fail`.

use super::partition::{components, groups_grudge, grudge};
use super::schedule::{
    ClockMode, FaultKind, FrameMode, Grudge, PartitionShape, PlannedFault, TargetSpec,
};
use super::seam::NemesisContext;
use super::targets::{resolve, Ensemble};
use crate::control::fault::clock::{Clock, ClockChange, ClockSetting};
use crate::control::fault::packet::{self, engine::Engine, PacketMode, PacketRecord};
use crate::control::{fault::frames, fault::iptables, Net};
use crate::history::{EventType, FaultValue, F, NEMESIS};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A fault in force, with what is needed to undo it.
#[derive(Debug, Clone)]
pub enum Active {
    Killed {
        nodes: Vec<String>,
    },
    /// Killed and their un-fsynced writes forgotten; `start` brings them back.
    PowerLost {
        nodes: Vec<String>,
    },
    /// Killed and a data file damaged; `start` brings them back on the damaged file.
    Corrupted {
        nodes: Vec<String>,
    },
    Paused {
        nodes: Vec<String>,
    },
    Partitioned {
        nodes: Vec<String>,
    },
    /// Packet faults on the links from `nodes`, in the fault's own chain (and queue) `slot`;
    /// `engines` hold the NFQUEUE engines (delay, duplicate, reorder), stopped by the heal;
    /// `qdisc`: a bandwidth fault, whose heal removes the root qdisc too.
    Packets {
        nodes: Vec<String>,
        engines: Arc<Mutex<Vec<Engine>>>,
        slot: packet::Slot,
        qdisc: bool,
    },
    /// Bad frames were written to these nodes' election ports (done at once); the undo only
    /// records the heal that closes the fault's interval.
    Framed {
        nodes: Vec<String>,
    },
    /// `strobe` = Some((delta_ms, period)) while the clock flips.
    Skewed {
        nodes: Vec<String>,
        strobe: Option<(i64, Duration)>,
    },
}

impl Active {
    /// The kind of fault in force.
    pub fn kind(&self) -> FaultKind {
        match self {
            Active::Killed { .. } => FaultKind::Kill,
            Active::PowerLost { .. } => FaultKind::PowerLoss,
            Active::Corrupted { .. } => FaultKind::Corrupt,
            Active::Paused { .. } => FaultKind::Pause,
            Active::Partitioned { .. } => FaultKind::Partition,
            Active::Packets { .. } => FaultKind::Packet,
            Active::Framed { .. } => FaultKind::Frames,
            Active::Skewed { .. } => FaultKind::Clock,
        }
    }

    /// The nodes it holds (a composition's `main` nodes, for its parts).
    pub fn nodes(&self) -> &[String] {
        match self {
            Active::Killed { nodes }
            | Active::PowerLost { nodes }
            | Active::Corrupted { nodes }
            | Active::Paused { nodes }
            | Active::Partitioned { nodes }
            | Active::Packets { nodes, .. }
            | Active::Framed { nodes }
            | Active::Skewed { nodes, .. } => nodes,
        }
    }
}

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

/// Applies `fault`, recording it. Returns None when nothing was done (recorded as `fail`).
pub fn apply(ctx: &NemesisContext, fault: &PlannedFault) -> Option<Active> {
    let nodes = ctx.observations.nodes().to_vec();
    let leader = leader_now(ctx);
    let t = &fault.template;
    let resolved = if t.kind == FaultKind::Frames {
        frames_targets(
            &t.target,
            ensemble(ctx, &nodes),
            leader.as_deref(),
            fault.pick,
        )
    } else {
        resolve(
            &t.target,
            ensemble(ctx, &nodes),
            leader.as_deref(),
            fault.pick,
        )
    };
    let base = base_value(fault, &resolved);
    let f = t.kind.f();
    let result = match t.kind {
        FaultKind::Kill => {
            // Its undo restarts only what it killed: a node already down (another part of
            // a composition killed it) comes back with that part's undo.
            let up: Vec<String> = resolved
                .nodes
                .iter()
                .filter(|n| ctx.target.is_running(n))
                .cloned()
                .collect();
            signal_all(ctx, &resolved.nodes, f, &base, |n| ctx.target.kill(n))
                .map(|()| Active::Killed { nodes: up })
        }
        FaultKind::Pause => signal_all(ctx, &resolved.nodes, f, &base, |n| ctx.target.pause(n))
            .map(|()| Active::Paused {
                nodes: resolved.nodes.clone(),
            }),
        FaultKind::Partition => {
            let shape = t.shape.unwrap_or(PartitionShape::RandomHalves);
            let targets = if matches!(
                shape,
                PartitionShape::IsolateLeader | PartitionShape::LeaderMinority
            ) {
                let ens = ensemble(ctx, &nodes);
                resolve(&TargetSpec::Leader, ens, leader.as_deref(), fault.pick).nodes
            } else {
                resolved.nodes.clone()
            };
            partition(
                ctx,
                (shape, t.cut),
                ensemble(ctx, &nodes),
                &targets,
                (t.groups.as_deref(), t.drops.as_ref()),
                fault.pick,
                &base,
            )
        }
        FaultKind::Clock => skew(ctx, t.clock, fault, &resolved.nodes, &base),
        FaultKind::PowerLoss => power_loss(ctx, fault, &resolved.nodes, &base),
        FaultKind::Corrupt => corrupt(
            ctx,
            fault,
            t.file.as_deref().unwrap_or("txnlog"),
            &resolved.nodes,
            &base,
        ),
        FaultKind::Packet => packets(
            ctx,
            t.packet.unwrap_or(PacketMode::Loss { percent: 30.0 }),
            t.shape,
            &nodes,
            &resolved.nodes,
            (t.groups.as_deref(), t.drops.as_ref()),
            fault.pick,
            &base,
        ),
        FaultKind::Frames => frames(
            ctx,
            t.frames.unwrap_or(FrameMode::Truncated),
            fault,
            &nodes,
            &resolved.nodes,
            &base,
        ),
    };
    match result {
        Ok(active) => Some(active),
        Err(e) => {
            let mut value = base.clone();
            value["error"] = json!(format!("{e:#}"));
            ctx.recorder
                .record(NEMESIS, EventType::Fail, f, None, value);
            None
        }
    }
}

/// Undoes a fault, recording it. Errors are recorded, never raised: the run goes on.
pub fn undo(ctx: &NemesisContext, active: &Active) {
    let nodes = active.nodes();
    let value = FaultValue::undo(active.kind(), nodes, false).to_json();
    match active {
        Active::Killed { .. } | Active::PowerLost { .. } | Active::Corrupted { .. } => {
            let _ = signal_all(ctx, nodes, F::Start, &value, |n| {
                ctx.target.start(n).map(Some)
            });
        }
        Active::Paused { .. } => {
            let _ = signal_all(ctx, nodes, F::Resume, &value, |n| ctx.target.resume(n));
        }
        Active::Partitioned { .. } => {
            // A partition was only made through the cluster's `Net`, so it is there.
            if let Some(net) = ctx.control.net() {
                heal_partition(ctx, net, nodes, false)
            }
        }
        Active::Skewed { .. } => reset_clocks(ctx, nodes, false),
        Active::Framed { .. } => {
            record_undo(ctx, F::Heal, single(nodes), value, false, BTreeMap::new);
        }
        Active::Packets {
            engines,
            slot,
            qdisc,
            ..
        } => {
            if let Some(net) = ctx.control.net() {
                let engines = std::mem::take(&mut *engines.lock().unwrap());
                let what = packet::Heal::One {
                    chain: &slot.chain(),
                    qdisc: *qdisc,
                };
                heal_packets(ctx, net, nodes, what, engines, false)
            }
        }
    }
}

/// The directed links (from -> the peers it sends to) a packet fault degrades: an exact grudge
/// (a replayed step's links) or a partition shape's cut links when given, else every link
/// from or to a target.
pub fn packet_links(
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
        peers.sort_by_key(|n| crate::history::sid_of(n));
        peers.dedup();
    }
    links
}

/// Packet faults: on each sending node, the mode applied to its packets for the chosen peers
/// (the fault's own chain `flc-packet-N` and engine NFQUEUE, or the `f1c:` qdisc), each
/// recorded first.
#[allow(clippy::too_many_arguments)]
fn packets(
    ctx: &NemesisContext,
    mode: PacketMode,
    shape: Option<PartitionShape>,
    nodes: &[String],
    targets: &[String],
    (groups, exact): (Option<&[Vec<String>]>, Option<&Grudge>),
    pick: u64,
    base: &Value,
) -> Result<Active> {
    let Some(net) = ctx.control.net() else {
        bail!(
            "packet faults need nodes with their own network stack (--net netns, or hosts over SSH)"
        );
    };
    let named = groups.into_iter().flatten().flatten();
    let named = named.chain(exact.into_iter().flat_map(|g| {
        g.iter()
            .flat_map(|(to, froms)| std::iter::once(to).chain(froms))
    }));
    if let Some(unknown) = named.into_iter().find(|n| !nodes.contains(n)) {
        bail!("the links name {unknown}, which is not a node of this cluster");
    }
    let ens = ensemble(ctx, nodes);
    let links = packet_links(shape, ens, targets, (groups, exact), pick);
    let record = PacketRecord {
        mode,
        links: links
            .iter()
            .flat_map(|(from, tos)| tos.iter().map(move |to| [from.clone(), to.clone()]))
            .collect(),
    };
    let mut value = base.clone();
    if let (Value::Object(fields), Some(v)) = (json!(record), value.as_object_mut()) {
        v.extend(fields);
    }
    if let Some(shape) = shape {
        value["shape"] = json!(shape.name());
    }
    let mut ends: Vec<&String> = record.links.iter().flatten().collect();
    ends.sort_by_key(|n| crate::history::sid_of(n));
    ends.dedup();
    value["nodes"] = json!(ends);
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, F::Packet, None, value.clone());
    // Where each link's fault is put: its sender, or its receiver for loss.
    let mut at: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (from, tos) in &links {
        for to in tos {
            let (node, peer) = if mode.on_receiver() {
                (to, from)
            } else {
                (from, to)
            };
            at.entry(node.clone()).or_default().push(peer.clone());
        }
    }
    let senders: Vec<String> = at.keys().cloned().collect();
    let engines = Arc::new(Mutex::new(Vec::new()));
    let mut rules = BTreeMap::new();
    let slot = packet::Slot::next();
    let qdisc = matches!(mode, PacketMode::Bandwidth { .. });
    // Nodes where this fault may have put something (a refused bandwidth fault has not).
    let mut touched: Vec<String> = Vec::new();
    let mut install = || -> Result<()> {
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
                let engine = Engine::start(from, ns, mode, seed, slot.queue())?;
                engines.lock().unwrap().push(engine);
            }
            // One root qdisc per interface: `install` refuses a second bandwidth fault, which
            // must not take the first one's qdisc with it.
            let refused =
                qdisc && netns.is_some() && packet::has_qdisc(ctx.control.as_ref(), from)?;
            if !refused {
                touched.push(from.clone());
            }
            rules.insert(
                from.clone(),
                packet::install(ctx.control.as_ref(), netns, from, &mode, tos, slot)?,
            );
        }
        Ok(())
    };
    if let Err(e) = install() {
        // Take back what was put in place before the error, then say why.
        let what = packet::Heal::One {
            chain: &slot.chain(),
            qdisc,
        };
        let errors = unpacket(ctx, net, &touched, what);
        for engine in engines.lock().unwrap().drain(..) {
            engine.stop();
        }
        if !errors.is_empty() {
            return Err(e.context(format!("and taking it back left: {errors:?}")));
        }
        return Err(e);
    }
    value["chain"] = json!(slot.chain());
    if mode.needs_engine() {
        value["queue"] = json!(slot.queue());
    }
    if matches!(mode, PacketMode::Bandwidth { .. }) {
        value["qdisc"] = json!(packet::QDISC);
    }
    value["rules"] = json!(rules);
    ctx.recorder
        .record(NEMESIS, EventType::Info, F::Packet, None, value);
    Ok(Active::Packets {
        nodes: senders,
        engines,
        slot,
        qdisc,
    })
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
pub fn heal_packets(
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
    let mut value = FaultValue::undo(FaultKind::Packet, nodes, last).to_json();
    value["chain"] = json!(chain);
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, F::Heal, None, value.clone());
    let errors = unpacket(ctx, net, nodes, what);
    let stats: BTreeMap<String, _> = engines
        .into_iter()
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

/// Whom a frames fault may hit: a server keeps only the election connections a larger sid
/// dialed, so the largest sid is left out of the drawn targets (leader, trigger and named
/// nodes are kept, and refused with the reason at apply). A minority is drawn among the
/// followers: what the next election needs is voters that cannot hear.
fn frames_targets(
    spec: &TargetSpec,
    ens: Ensemble,
    leader: Option<&str>,
    pick: u64,
) -> super::targets::Resolved {
    use super::targets::drawn;
    let nodes = ens.nodes;
    let largest = resolve(&TargetSpec::Highest, ens, leader, pick).nodes.pop();
    let smaller: Vec<String> = nodes
        .iter()
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
            let followers: Vec<String> = smaller
                .iter()
                .filter(|x| Some(x.as_str()) != leader)
                .cloned()
                .collect();
            drawn(followers, n - crate::api::quorum(n), pick)
        }
        TargetSpec::Majority => drawn(smaller, crate::api::quorum(n), pick),
        _ => resolve(
            spec,
            Ensemble {
                nodes: &smaller,
                ..ens
            },
            leader,
            pick,
        ),
    }
}

/// Bad frames: for each node, the controller dials its election port as the largest larger
/// sid and writes `mode`'s bytes (seeded), then hangs up (`control::fault::frames`). Done at once;
/// the value says per node the sid used, the seed and the bytes sent.
fn frames(
    ctx: &NemesisContext,
    mode: FrameMode,
    fault: &PlannedFault,
    all: &[String],
    nodes: &[String],
    base: &Value,
) -> Result<Active> {
    let f = F::Frames;
    let mut value = base.clone();
    value["mode"] = json!(mode.name());
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, single(nodes), value.clone());
    let sids: Vec<u64> = all
        .iter()
        .filter_map(|n| crate::history::sid_of(n))
        .collect();
    let (mut sent, mut errors) = (BTreeMap::new(), BTreeMap::new());
    for (i, node) in nodes.iter().enumerate() {
        let seed = fault.node_seed(i);
        let result = (|| -> Result<frames::Sent> {
            let sid = crate::history::sid_of(node).ok_or_else(|| anyhow!("no sid"))?;
            let Some(as_sid) = frames::impersonate(sid, &sids) else {
                bail!(
                    "{node} has the largest sid: a server keeps no election connection another \
                     server dialed, so nothing can be written to it as a peer"
                );
            };
            let as_node = all
                .iter()
                .find(|n| crate::history::sid_of(n) == Some(as_sid))
                .ok_or_else(|| anyhow!("no node with sid {as_sid}"))?;
            let unknown = |n: &str| anyhow!("{n}'s election port is not known to the controller");
            let to = ctx
                .target
                .election_addr(node)
                .ok_or_else(|| unknown(node))?;
            let as_addr = ctx
                .target
                .election_addr(as_node)
                .ok_or_else(|| unknown(as_node))?;
            frames::send(to, as_sid, as_addr, mode, seed)
        })();
        match result {
            Ok(s) => {
                sent.insert(node.clone(), json!(s));
            }
            Err(e) => {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
    }
    value["sent"] = json!(sent);
    if !errors.is_empty() {
        value["errors"] = json!(errors);
    }
    let ok = !sent.is_empty();
    let kind = if ok { EventType::Info } else { EventType::Fail };
    ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
    if !ok {
        bail!("no frame was written");
    }
    Ok(Active::Framed {
        nodes: sent.keys().cloned().collect(),
    })
}

/// Power loss: each node is SIGKILLed, then its filesystem forgets every write not yet fsynced
/// (the last one torn at a seeded byte); the value says exactly what each node lost.
fn power_loss(
    ctx: &NemesisContext,
    fault: &PlannedFault,
    nodes: &[String],
    base: &Value,
) -> Result<Active> {
    let f = F::PowerLoss;
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
    let (mut pids, mut lost, mut errors) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (i, node) in nodes.iter().enumerate() {
        let tear = fault.pick.wrapping_mul(31).wrapping_add(i as u64);
        match ctx
            .target
            .kill(node)
            .and_then(|pid| Ok((pid, ctx.target.power_loss(node, Some(tear))?)))
        {
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
    if !errors.is_empty() {
        value["errors"] = json!(errors);
    }
    let done = !lost.is_empty();
    let kind = if done {
        EventType::Info
    } else {
        EventType::Fail
    };
    ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
    if !done {
        bail!("no node lost power");
    }
    Ok(Active::PowerLost {
        nodes: lost.keys().cloned().collect(),
    })
}

/// File corruption: each node is SIGKILLed, then its `file` is damaged at a seeded place (bits
/// flipped, a block zeroed, or cut short); the value says the file, what, where and how long,
/// and why a killed node's file could not be damaged (`errors`).
fn corrupt(
    ctx: &NemesisContext,
    fault: &PlannedFault,
    file: &str,
    nodes: &[String],
    base: &Value,
) -> Result<Active> {
    let f = F::Corrupt;
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
    let (mut pids, mut done, mut errors) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (i, node) in nodes.iter().enumerate() {
        let seed = fault.node_seed(i);
        match ctx.target.kill(node) {
            Ok(pid) => {
                pids.insert(node.clone(), json!(pid));
            }
            Err(e) => {
                errors.insert(node.clone(), format!("{e:#}"));
                continue;
            }
        }
        // A node killed but not damaged (its file not written yet) still restarts at the undo.
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
    value["pids"] = json!(pids);
    value["damage"] = json!(done);
    if !errors.is_empty() {
        value["errors"] = json!(errors);
    }
    let ok = !pids.is_empty();
    let kind = if ok { EventType::Info } else { EventType::Fail };
    ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
    if !ok {
        bail!("no node was stopped to damage its file");
    }
    Ok(Active::Corrupted {
        nodes: pids.keys().cloned().collect(),
    })
}

/// Runs `op` on every node (kill, pause, start, resume) and records invoke + info with the pids.
fn signal_all(
    ctx: &NemesisContext,
    nodes: &[String],
    f: F,
    base: &Value,
    op: impl Fn(&str) -> Result<Option<u32>>,
) -> Result<()> {
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, single(nodes), base.clone());
    let mut pids = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for node in nodes {
        match op(node) {
            Ok(pid) => {
                pids.insert(node.clone(), json!(pid));
            }
            Err(e) => {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
    }
    let mut value = base.clone();
    value["pids"] = json!(pids);
    if errors.is_empty() {
        ctx.recorder
            .record(NEMESIS, EventType::Info, f, single(nodes), value);
        Ok(())
    } else {
        value["errors"] = json!(errors);
        // Partly done is still done: record what happened; fail only if nothing happened.
        let kind = if pids.is_empty() {
            EventType::Fail
        } else {
            EventType::Info
        };
        ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
        if pids.is_empty() {
            Err(anyhow!("no node was affected"))
        } else {
            Ok(())
        }
    }
}

fn partition(
    ctx: &NemesisContext,
    (shape, how): (PartitionShape, iptables::Cut),
    ens: Ensemble,
    targets: &[String],
    (groups, drops): (Option<&[Vec<String>]>, Option<&Grudge>),
    pick: u64,
    base: &Value,
) -> Result<Active> {
    let nodes = ens.nodes;
    let Some(net) = ctx.control.net() else {
        bail!(
            "partitions need nodes with their own network stack (--net netns, or hosts over SSH)"
        );
    };
    let g = match (drops, groups) {
        // A timed step's exact grudge.
        (Some(d), _) => {
            let mut named = d
                .iter()
                .flat_map(|(a, from)| std::iter::once(a).chain(from));
            if let Some(unknown) = named.find(|n| !nodes.contains(n)) {
                bail!("drops name {unknown}, which is not a node of this cluster");
            }
            d.clone()
        }
        (None, Some(groups)) => {
            if let Some(unknown) = groups.iter().flatten().find(|n| !nodes.contains(n)) {
                bail!("groups name {unknown}, which is not a node of this cluster");
            }
            groups_grudge(nodes, groups)
        }
        (None, None) => grudge(shape, ens, targets, pick),
    };
    let mut value = base.clone();
    // An exact grudge is no named shape.
    value["shape"] = json!(if drops.is_some() {
        "drops"
    } else {
        shape.name()
    });
    value["nodes"] = json!(g.keys().collect::<Vec<_>>());
    value["drops"] = json!(g);
    value["components"] = json!(components(nodes, &g));
    if let Some(port) = how.port() {
        // Additive history field: only the Zab connections were cut.
        value["port"] = json!(port);
    }
    ctx.recorder.record(
        NEMESIS,
        EventType::Invoke,
        F::Partition,
        None,
        value.clone(),
    );
    let rules = cut(net, &g, how)?;
    value["chain"] = json!(iptables::CHAIN);
    value["rules"] = json!(rules);
    ctx.recorder
        .record(NEMESIS, EventType::Info, F::Partition, None, value);
    Ok(Active::Partitioned {
        nodes: g.keys().cloned().collect(),
    })
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
pub fn heal_partition(ctx: &NemesisContext, net: &dyn Net, nodes: &[String], last: bool) {
    let mut value = FaultValue::undo(FaultKind::Partition, nodes, false).to_json();
    value["chain"] = json!(iptables::CHAIN);
    record_undo(ctx, F::Heal, None, value, last, || uncut(net, nodes));
}

/// Records an undo as `invoke`, then `info`, or `fail` naming the nodes `undo` could not put
/// right (its map of node -> error).
fn record_undo(
    ctx: &NemesisContext,
    f: F,
    node: Option<&str>,
    mut value: Value,
    last: bool,
    undo: impl FnOnce() -> BTreeMap<String, String>,
) {
    if last {
        value["final"] = json!(true);
    }
    ctx.recorder
        .record(NEMESIS, EventType::Invoke, f, node, value.clone());
    let errors = undo();
    let kind = if errors.is_empty() {
        EventType::Info
    } else {
        value["errors"] = json!(errors);
        EventType::Fail
    };
    ctx.recorder.record(NEMESIS, kind, f, node, value);
}

fn skew(
    ctx: &NemesisContext,
    mode: Option<ClockMode>,
    fault: &PlannedFault,
    nodes: &[String],
    base: &Value,
) -> Result<Active> {
    let clock = clock_of(ctx)?;
    let mode = mode.unwrap_or(ClockMode::Bump {
        delta_ms: 60_000,
        random_sign: true,
    });
    let mut value = base.clone();
    let (setting, strobe) = match mode {
        ClockMode::Bump { delta_ms, .. } => {
            let delta = fault.clock_delta_ms.unwrap_or(delta_ms);
            value["mode"] = json!("bump");
            value["offset_ms"] = json!(delta);
            (ClockSetting::Offset(delta), None)
        }
        ClockMode::Strobe {
            delta_ms,
            period_ms,
        } => {
            value["mode"] = json!("strobe");
            value["offset_ms"] = json!(delta_ms);
            value["period_ms"] = json!(period_ms);
            (
                ClockSetting::Offset(delta_ms),
                Some((delta_ms, Duration::from_millis(period_ms))),
            )
        }
        ClockMode::Rate { factor } => {
            value["mode"] = json!("rate");
            value["factor"] = json!(factor);
            (ClockSetting::Rate(factor), None)
        }
    };
    let mechanism = clock.mechanism();
    value["mechanism"] = json!(mechanism.name());
    ctx.recorder.record(
        NEMESIS,
        EventType::Invoke,
        F::Clock,
        single(nodes),
        value.clone(),
    );
    let mut done = BTreeMap::new();
    for node in nodes {
        done.insert(node.clone(), clock.set(node, setting)?);
    }
    value[mechanism.changes_field()] = json!(done);
    ctx.recorder
        .record(NEMESIS, EventType::Info, F::Clock, single(nodes), value);
    Ok(Active::Skewed {
        nodes: nodes.to_vec(),
        strobe,
    })
}

/// The cluster's clock: the hosts' own (`--real-clock-skew`) or the nodes' libfaketime files.
pub fn clock_of(ctx: &NemesisContext) -> Result<&dyn Clock> {
    ctx.target.clock().ok_or_else(|| {
        anyhow!(
            "the nodes' clocks cannot be moved: they do not run under libfaketime, and the hosts' \
             clocks may not be stepped (--ssh --real-clock-skew)"
        )
    })
}

/// Puts `setting` in force on `node`'s clock; returns what was done.
pub fn set_clock(ctx: &NemesisContext, node: &str, setting: ClockSetting) -> Result<ClockChange> {
    clock_of(ctx)?.set(node, setting)
}

/// Sets `nodes`' clocks back to +0 and records it.
pub fn reset_clocks(ctx: &NemesisContext, nodes: &[String], last: bool) {
    let mut value = FaultValue::undo(FaultKind::Clock, nodes, false).to_json();
    if let Some(clock) = ctx.target.clock() {
        value["mechanism"] = json!(clock.mechanism().name());
    }
    record_undo(ctx, F::Clock, single(nodes), value, last, || {
        let mut errors = BTreeMap::new();
        for node in nodes {
            if let Err(e) = set_clock(ctx, node, ClockSetting::Offset(0)) {
                errors.insert(node.clone(), format!("{e:#}"));
            }
        }
        errors
    });
}

/// The `node` field of an event about `nodes`: set only when it is one node.
fn single(nodes: &[String]) -> Option<&str> {
    match nodes {
        [one] => Some(one.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod packet_link_tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    #[test]
    fn without_a_shape_every_link_of_the_targets_is_hit() {
        let all = nodes(3);
        let links = packet_links(None, Ensemble::voting(&all), &all, (None, None), 0);
        assert_eq!(links.values().map(Vec::len).sum::<usize>(), 6);
        let one = packet_links(
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
        let links = packet_links(
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
        let links = packet_links(
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
