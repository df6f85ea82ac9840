//! The nemesis in the simulator: the loop a real run uses (`nemesis::runner`: the same plan,
//! steering, goals, triggers and compositions), driven by virtual time, acting on the simulated
//! servers, network, disks and clocks (`SimWorld`) instead of on processes and iptables. Each
//! fault is done by its kind's own file (`nemesis::faults`: the same targets, the same recorded
//! values). The loop is an async function, parked between its steps on virtual time
//! (`nemesis::virtual_time`): the run's event loop steps it when the world's clock reaches
//! the time it asked for ([`SimNemesis::step`]).

use super::net::Port;
use super::streams::Stream;
use super::world::World;
use crate::control::fault::packet::PacketMode;
use crate::history::situation::{Phase, Situation};
use crate::history::{node_name, sid_of, EventType, FaultKind, FaultValue, F, NEMESIS};
use crate::nemesis::env::{verify_records, NemesisEnv, Steering};
use crate::nemesis::faults::clock::ClockSkew;
use crate::nemesis::faults::{self, Life, Order, SimWorld};
use crate::nemesis::schedule::{PlannedFault, Schedule, TargetSpec};
use crate::nemesis::targets::resolve;
use crate::nemesis::virtual_time::{Alarm, Parked};
use crate::workload::observe::Observations;
use rand::Rng;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// A fault in force, and what its undo must do.
#[derive(Debug, Clone)]
pub struct InForce {
    id: u64,
    kind: FaultKind,
    nodes: Vec<String>,
}

/// The simulated run's nemesis: the shared loop, parked between its steps.
pub struct SimNemesis {
    world: Rc<RefCell<World>>,
    loop_: Parked,
    in_force: Rc<RefCell<Vec<InForce>>>,
    kinds: Vec<FaultKind>,
}

impl SimNemesis {
    /// The loop of `schedule` for `seed` on `world`, not yet started.
    pub fn new(
        world: Rc<RefCell<World>>,
        schedule: &Schedule,
        seed: u64,
        time_limit: Duration,
        steering: Steering,
    ) -> SimNemesis {
        let alarm = Alarm::new();
        let in_force = Rc::new(RefCell::new(Vec::new()));
        let mut env = SimEnv {
            world: Rc::clone(&world),
            alarm: Rc::clone(&alarm),
            in_force: Rc::clone(&in_force),
            next_id: 0,
        };
        let kinds = schedule.kinds();
        let schedule = schedule.clone();
        let run = async move {
            crate::nemesis::runner::run_plan(&mut env, &schedule, seed, time_limit, &steering).await
        };
        SimNemesis {
            world,
            loop_: Parked::new(alarm, run),
            in_force,
            kinds,
        }
    }

    /// Runs the loop at the world's time until it waits again; returns when it next wants to
    /// run (None: not before the run stops).
    pub fn step(&mut self) -> Option<u64> {
        let now = self.world.borrow().now();
        self.loop_.step(now)
    }

    /// The run's time is up: the loop returns at once (a composition's parts in force are
    /// undone on its way out, as a real run's are).
    pub fn stop(&mut self) {
        let now = self.world.borrow().now();
        self.loop_.stop(now);
    }

    /// The final phase's heal: every fault undone, marked `final`, and every node up.
    pub fn final_heal(self, w: &mut World) {
        debug_assert!(self.loop_.done(), "the final heal comes after stop");
        let in_force = std::mem::take(&mut *self.in_force.borrow_mut());
        for a in in_force.iter().rev() {
            undo(w, a, false);
        }
        // As `live::heal_everything`: nodes still down are started (not marked final),
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

/// The simulated world as the nemesis loop sees it.
struct SimEnv {
    world: Rc<RefCell<World>>,
    alarm: Rc<Alarm>,
    in_force: Rc<RefCell<Vec<InForce>>>,
    next_id: u64,
}

impl NemesisEnv for SimEnv {
    type Applied = InForce;

    fn now(&self) -> Duration {
        // The clock the loop's sleeps read (set from the world's at each step).
        Duration::from_nanos(self.alarm.now())
    }

    fn sleep_until(&mut self, at: Duration) -> impl Future<Output = bool> {
        self.alarm.sleep(Some(at.as_nanos() as u64))
    }

    async fn stopped(&mut self) {
        self.alarm.sleep(None).await;
    }

    fn apply(&mut self, fault: &PlannedFault) -> Option<InForce> {
        self.next_id += 1;
        let applied = apply(&mut self.world.borrow_mut(), fault, self.next_id);
        self.in_force.borrow_mut().push(applied.clone());
        Some(applied)
    }

    fn undo(&mut self, applied: InForce) {
        undo(&mut self.world.borrow_mut(), &applied, false);
        self.in_force.borrow_mut().retain(|a| a.id != applied.id);
    }

    fn hit(applied: &InForce) -> Vec<String> {
        applied.nodes.clone()
    }

    fn strobe(&self, _: &InForce) -> Option<(i64, Duration)> {
        None
    }

    fn flip(&mut self, _: &InForce, _: i64) {}

    fn nodes(&self) -> Vec<String> {
        node_names(&self.world.borrow())
    }

    fn is_running(&self, node: &str) -> bool {
        let w = self.world.borrow();
        sid_of(node).is_some_and(|s| w.life(s) != Life::Down)
    }

    fn resolve_now(&self, spec: &TargetSpec, pick: u64) -> Vec<String> {
        resolve_in(&self.world.borrow(), spec, pick).nodes
    }

    fn observations<R>(&self, read: impl FnOnce(&Observations) -> R) -> R {
        read(&self.world.borrow().rec.observations)
    }

    fn situations_met(&self) -> BTreeSet<Situation> {
        self.world.borrow().rec.situations.met()
    }

    fn situations_mark(&self) -> usize {
        self.world.borrow().rec.situations.classified()
    }

    fn met_since(&self, mark: usize) -> Vec<Situation> {
        self.world.borrow().rec.situations.since(mark).to_vec()
    }

    fn phase_now(&self) -> Phase {
        let w = self.world.borrow();
        w.rec.situations.phase_now(&w.rec.view, w.now())
    }

    fn settled_since(&self, since: Duration) -> bool {
        let since_ns = since.as_nanos() as u64;
        self.world.borrow().rec.view.settled(since_ns).is_settled()
    }
}

/// Applies one fault (its kind's [`faults::Fault::apply_sim`]) and records it.
fn apply(w: &mut World, f: &PlannedFault, id: u64) -> InForce {
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
    let base = crate::nemesis::inject::base_value(f, &resolved);
    let order = Order {
        fault: f,
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
    InForce {
        id,
        kind: t.kind,
        nodes: hit,
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

/// As `live`'s verify: the final heal's last record, whether every process runs unstopped
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
    for (kind, value) in verify_records(names, problems) {
        w.rec.record(NEMESIS, kind, F::Heal, None, value);
    }
}

/// A heal of `kind` on `nodes` that belongs to no fault in force (the final heal's).
fn everywhere(kind: FaultKind, nodes: Vec<String>) -> InForce {
    InForce { id: 0, kind, nodes }
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
            true => (self.streams.of(Stream::Torn { sid })).gen_range(0..64),
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
