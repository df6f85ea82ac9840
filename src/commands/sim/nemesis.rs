//! The nemesis in the simulator: the same planned faults a real run deals (`nemesis::plan`),
//! aimed by the same triggers (`nemesis::trigger::Watch` over the same observations), each
//! done by its kind's own file (`nemesis::faults`: the same targets, the same recorded
//! values), to the simulated servers, network, disks and clocks (`SimWorld`) instead of to
//! processes and iptables.

use super::net::Port;
use super::world::World;
use crate::control::fault::packet::PacketMode;
use crate::history::{node_name, sid_of, EventType, FaultKind, FaultValue, F, NEMESIS};
use crate::nemesis::faults::clock::ClockSkew;
use crate::nemesis::faults::{self, Life, Order, SimWorld};
use crate::nemesis::schedule::{PlannedFault, Schedule, TargetSpec, DEFAULT_WAIT};
use crate::nemesis::targets::resolve;
use crate::nemesis::trigger::Watch;
use rand::Rng;
use serde_json::{json, Value};

/// A fault in force, and what its undo must do.
#[derive(Debug, Clone)]
struct InForce {
    id: u64,
    kind: FaultKind,
    nodes: Vec<String>,
    undo_at: u64,
}

pub struct SimNemesis {
    planned: Vec<PlannedFault>,
    next: usize,
    window_end: u64,
    free_at: u64,
    /// The fault being waited for (its trigger) until the given time.
    waiting: Option<(PlannedFault, Watch, u64)>,
    /// Composed parts still to start: (when, part).
    parts: Vec<(u64, PlannedFault)>,
    /// A part waiting for its own trigger until the given time, undone at the last one (its
    /// span stays as planned); the parts after it wait behind it, as in the runner.
    part_waiting: Option<(PlannedFault, Watch, u64, u64)>,
    /// The composition in force: its main fault and the nodes that fault hit (what its parts'
    /// `main`, `others` and `trigger` targets name).
    main: Option<(PlannedFault, Vec<String>)>,
    active: Vec<InForce>,
    next_id: u64,
    kinds: Vec<FaultKind>,
}

const TRIGGER_POLL_NS: u64 = 5_000_000;

impl SimNemesis {
    pub fn new(planned: Vec<PlannedFault>, schedule: &Schedule, window_ns: u64) -> SimNemesis {
        SimNemesis {
            planned,
            next: 0,
            window_end: window_ns,
            free_at: 0,
            waiting: None,
            parts: Vec::new(),
            part_waiting: None,
            main: None,
            active: Vec::new(),
            next_id: 0,
            kinds: schedule.kinds(),
        }
    }

    /// Does what is due now; returns when it next needs a look.
    pub fn step(&mut self, w: &mut World) -> Option<u64> {
        let now = w.now();
        // Undos and parts due.
        self.active.sort_by_key(|a| (a.undo_at, a.id));
        while let Some(a) = self.active.first().filter(|a| a.undo_at <= now).cloned() {
            self.active.remove(0);
            undo(w, &a, false);
        }
        self.parts.sort_by_key(|(t, _)| *t);
        self.poll_part(w);
        while self.part_waiting.is_none() {
            let Some((due, part)) = self.parts.first().filter(|(t, _)| *t <= now).cloned() else {
                break;
            };
            self.parts.remove(0);
            self.start_part(w, due, part);
        }
        let busy = !self.active.is_empty() || !self.parts.is_empty() || self.part_waiting.is_some();
        if busy {
            self.free_at = now;
        }
        if let Some((fault, mut watch, until)) = self.waiting.take() {
            match watch.poll(&w.rec.observations) {
                Some(fired) => {
                    let mut f = fault;
                    let trigger = f.template.when.expect("a waiting fault has a trigger");
                    crate::nemesis::runner::aim(&mut f, trigger, Some(fired));
                    self.start(w, f);
                }
                None if now + TRIGGER_POLL_NS > until => {
                    let mut f = fault;
                    let trigger = f.template.when.expect("a waiting fault has a trigger");
                    crate::nemesis::runner::aim(&mut f, trigger, None);
                    self.start(w, f);
                }
                None => self.waiting = Some((fault, watch, until)),
            }
        } else if !busy {
            self.deal(w);
        }
        let mut next: Vec<u64> = self.active.iter().map(|a| a.undo_at).collect();
        // Parts behind a waiting one are due when it is done (polled below), not before.
        if self.part_waiting.is_none() {
            next.extend(self.parts.iter().map(|(t, _)| *t));
        }
        if self.waiting.is_some() || self.part_waiting.is_some() {
            next.push(now + TRIGGER_POLL_NS);
        }
        let idle = self.active.is_empty() && self.parts.is_empty() && self.part_waiting.is_none();
        if idle && self.waiting.is_none() {
            if let Some(f) = self.planned.get(self.next) {
                next.push((f.start.as_nanos() as u64).max(self.free_at + f.gap.as_nanos() as u64));
            }
        }
        next.into_iter().min()
    }

    /// The next planned fault, when it is due: started, or its trigger's wait begun.
    fn deal(&mut self, w: &mut World) {
        let now = w.now();
        let Some(f) = self.planned.get(self.next).cloned() else {
            return;
        };
        let at = (f.start.as_nanos() as u64).max(self.free_at + f.gap.as_nanos() as u64);
        if at + f.span().as_nanos() as u64 > self.window_end {
            self.next = self.planned.len();
            return;
        }
        if now < at {
            return;
        }
        self.next += 1;
        match f.template.when {
            Some(trigger) => {
                let wait = f.template.wait.unwrap_or(DEFAULT_WAIT).as_nanos() as u64;
                let until = (at + wait).min(self.window_end - f.span().as_nanos() as u64);
                let watch = Watch::new(trigger, &w.rec.observations);
                self.waiting = Some((f, watch, until));
            }
            None => self.start(w, f),
        }
    }

    /// Applies a fault and queues its composed parts at their offsets from now.
    fn start(&mut self, w: &mut World, f: PlannedFault) {
        let now = w.now();
        let mut main = f.clone();
        main.parts.clear();
        let hit = self.apply(w, main.clone(), now + f.duration.as_nanos() as u64);
        self.main = Some((main, hit));
        for p in &f.parts {
            self.parts
                .push((now + p.start.as_nanos() as u64, p.clone()));
        }
    }

    /// A part due at `due`: applied, or its own trigger's wait begun (as the runner's
    /// `composed`: at most its `wait`, never past its planned undo).
    fn start_part(&mut self, w: &mut World, due: u64, mut part: PlannedFault) {
        let undo_at = due + part.duration.as_nanos() as u64;
        let Some(trigger) = part.template.when else {
            if let Some((main, _)) = &self.main {
                crate::nemesis::runner::aim_at_main_trigger(&mut part, main);
            }
            return self.apply_part(w, part, undo_at);
        };
        let wait = part.template.wait.unwrap_or(DEFAULT_WAIT).as_nanos() as u64;
        let until = (due + wait).min(undo_at);
        let mut watch = Watch::new(trigger, &w.rec.observations);
        let main_nodes = self.main_nodes();
        let pick = part.pick;
        let among = crate::nemesis::runner::watched_nodes(&mut part, |spec| {
            composition_nodes_in(w, spec, &main_nodes)
                .unwrap_or_else(|| resolve_in(w, spec, pick).nodes)
        });
        if let Some(nodes) = among {
            watch = watch.among(nodes);
        }
        self.part_waiting = Some((part, watch, until, undo_at));
    }

    /// The waiting part, applied once its trigger fired or its wait ran out.
    fn poll_part(&mut self, w: &mut World) {
        let Some((mut part, mut watch, until, undo_at)) = self.part_waiting.take() else {
            return;
        };
        let trigger = part.template.when.expect("a waiting part has a trigger");
        match watch.poll(&w.rec.observations) {
            Some(fired) => crate::nemesis::runner::aim(&mut part, trigger, Some(fired)),
            None if w.now() + TRIGGER_POLL_NS > until => {
                crate::nemesis::runner::aim(&mut part, trigger, None)
            }
            None => return self.part_waiting = Some((part, watch, until, undo_at)),
        }
        self.apply_part(w, part, undo_at);
    }

    /// A part aimed at its composition's `main` or `others` nodes, then applied.
    fn apply_part(&mut self, w: &mut World, mut part: PlannedFault, undo_at: u64) {
        let nodes = composition_nodes_in(w, &part.template.target, &self.main_nodes());
        crate::nemesis::runner::point_at(&mut part, nodes);
        self.apply(w, part, undo_at);
    }

    fn main_nodes(&self) -> Vec<String> {
        self.main
            .as_ref()
            .map_or(Vec::new(), |(_, hit)| hit.clone())
    }

    /// Applies one fault (undone at `undo_at`, its kind's [`faults::Fault::apply_sim`]) and records it;
    /// returns the nodes it hit.
    fn apply(&mut self, w: &mut World, f: PlannedFault, undo_at: u64) -> Vec<String> {
        self.next_id += 1;
        let id = self.next_id;
        let names = node_names(w);
        let observers = w.observers.clone();
        let ens = crate::nemesis::targets::Ensemble {
            nodes: &names,
            observers: &observers,
        };
        let leader = leader_now(w);
        let t = &f.template;
        let target = match &t.target {
            TargetSpec::Main | TargetSpec::Others => TargetSpec::Random,
            other => other.clone(),
        };
        let kind = faults::of(t.kind);
        let resolved = kind.targets(&target, ens, leader.as_deref(), f.pick);
        let base = crate::nemesis::inject::base_value(&f, &resolved);
        let order = Order {
            fault: &f,
            ens,
            leader: leader.as_deref(),
            resolved: &resolved,
            base: &base,
        };
        let mut value = base.clone();
        let hit = kind.apply_sim(w, &order, id, &mut value);
        w.rec
            .record(NEMESIS, EventType::Invoke, t.kind.f(), None, base);
        w.rec
            .record(NEMESIS, EventType::Info, t.kind.f(), None, value);
        self.active.push(InForce {
            id,
            kind: t.kind,
            nodes: hit.clone(),
            undo_at,
        });
        hit
    }

    /// The final phase's heal: every fault undone, marked `final`, and every node up.
    pub fn final_heal(&mut self, w: &mut World) {
        self.waiting = None;
        self.part_waiting = None;
        self.parts.clear();
        for a in std::mem::take(&mut self.active).iter().rev() {
            undo(w, a, false);
        }
        // As `runner::heal_everything`: nodes still down are started (not marked final),
        // then each kind the schedule has is healed everywhere, marked final.
        if self.kinds.iter().any(|k| k.stops_node()) {
            let down: Vec<u64> = (w.servers.keys().copied())
                .filter(|s| w.life(*s) == Life::Down)
                .collect();
            for s in down {
                undo(w, &everywhere(FaultKind::Kill, vec![node_name(s)]), false);
            }
        }
        let names: Vec<String> = w.servers.keys().map(|s| node_name(*s)).collect();
        // As `heal_all` on a real cluster (frames, which has none, never reaches the simulator).
        for &kind in self.kinds.iter().filter(|k| !k.stops_node()) {
            undo(w, &everywhere(kind, names.clone()), true);
        }
        verify(w, &names);
    }
}

fn node_names(w: &World) -> Vec<String> {
    w.servers.keys().map(|s| node_name(*s)).collect()
}

/// The leader the reads show now (as the runner's `leader_now`).
fn leader_now(w: &World) -> Option<String> {
    let leader = (w.rec.observations).leader(w.now(), crate::nemesis::inject::LEADER_MAX_AGE_NS);
    leader.map(|(n, _)| n)
}

/// `spec`'s nodes now, resolved as a fault's target is.
fn resolve_in(w: &World, spec: &TargetSpec, pick: u64) -> crate::nemesis::targets::Resolved {
    let names = node_names(w);
    let ens = crate::nemesis::targets::Ensemble {
        nodes: &names,
        observers: &w.observers,
    };
    resolve(spec, ens, leader_now(w).as_deref(), pick)
}

/// A composition's `main` or `others` nodes (`runner::composition_nodes`; a process that is
/// not down runs).
fn composition_nodes_in(
    w: &World,
    spec: &TargetSpec,
    main_nodes: &[String],
) -> Option<Vec<String>> {
    let running = |n: &str| sid_of(n).is_some_and(|s| w.life(s) != Life::Down);
    crate::nemesis::runner::composition_nodes(spec, main_nodes, &node_names(w), running)
}

/// As `runner`'s verify: the final heal's last record, whether every process runs unstopped
/// and no link is cut (the checkers read it as the run's final heal whatever the kinds).
fn verify(w: &mut World, names: &[String]) {
    let sids: Vec<u64> = w.servers.keys().copied().collect();
    let mut problems = Vec::new();
    for &s in &sids {
        match w.life(s) {
            Life::Up => {}
            Life::Paused => problems.push(format!("{} is still stopped", node_name(s))),
            Life::Down => problems.push(format!("{} is not running", node_name(s))),
        }
        let cut = (sids.iter()).any(|&t| {
            t != s
                && [Port::Election, Port::Quorum]
                    .iter()
                    .any(|p| !w.net.passes(s, t, *p))
        });
        if cut {
            problems.push(format!("{} still has a cut link", node_name(s)));
        }
    }
    let kind = match problems.is_empty() {
        true => EventType::Info,
        false => EventType::Fail,
    };
    let invoke = json!({ "nodes": names, "final": true, "verify": true });
    w.rec
        .record(NEMESIS, EventType::Invoke, F::Heal, None, invoke);
    let value = json!({ "nodes": names, "final": true, "verify": true, "problems": problems });
    w.rec.record(NEMESIS, kind, F::Heal, None, value);
}

/// A heal of `kind` on `nodes` that belongs to no fault in force (the final heal's).
fn everywhere(kind: FaultKind, nodes: Vec<String>) -> InForce {
    InForce {
        id: 0,
        kind,
        nodes,
        undo_at: 0,
    }
}

/// Undoes one fault (its kind's [`faults::Fault::undo_sim`]), recorded as the real nemesis records it.
fn undo(w: &mut World, a: &InForce, last: bool) {
    let f = a.kind.undo_f();
    let value = FaultValue::undo(a.kind, &a.nodes, last).to_json();
    w.rec
        .record(NEMESIS, EventType::Invoke, f, None, value.clone());
    faults::of(a.kind).undo_sim(w, &a.nodes, a.id);
    w.rec.record(NEMESIS, EventType::Info, f, None, value);
}

/// The world as the faults' files see it (`nemesis::faults::SimWorld`).
impl SimWorld for World {
    fn now(&self) -> u64 {
        World::now(self)
    }

    fn life(&self, sid: u64) -> Life {
        World::life(self, sid)
    }

    fn kill(&mut self, sid: u64) {
        World::kill(self, sid)
    }

    fn start(&mut self, sid: u64) {
        World::start(self, sid)
    }

    fn pause(&mut self, sid: u64) {
        World::pause(self, sid)
    }

    fn resume(&mut self, sid: u64) {
        World::resume(self, sid)
    }

    fn lose_power(&mut self, sid: u64) -> Option<usize> {
        let server = self.servers.get_mut(&sid)?;
        let torn = match server.disk.unsynced() {
            true => self.rng.gen_range(0..64),
            false => 0,
        };
        Some(server.disk.power_loss(torn))
    }

    fn corrupt(&mut self, sid: u64, seed: u64) -> Option<Result<Value, String>> {
        let server = self.servers.get_mut(&sid)?;
        Some(server.disk.corrupt(seed).map(|d| json!(d)))
    }

    fn cut(&mut self, id: u64, from: u64, to: u64, quorum_only: bool) {
        self.net.cut(id, from, to, quorum_only)
    }

    fn degrade(&mut self, id: u64, from: u64, to: u64, mode: PacketMode) {
        self.net.degrade(id, from, to, mode)
    }

    fn heal_links(&mut self, id: u64) {
        let cut = self.election_cuts();
        if id > 0 {
            self.net.heal(id);
        }
        self.release_held(&cut);
    }

    fn set_clock(&mut self, sid: u64, skew: Option<ClockSkew>) {
        match skew {
            Some(skew) => self.clocks.insert(sid, skew),
            None => self.clocks.remove(&sid),
        };
    }
}
