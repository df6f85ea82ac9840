//! One home per fault kind: each file says whom its kind hits, how it is done and undone on a
//! real cluster (processes, iptables, clocks, disks) and on the simulated world, what its
//! history values hold and what it needs of the machine. [`FAULTS`] lists them, as
//! `checker::registry::CHECKERS` lists the checkers; `inject` (real runs) and the simulator's
//! nemesis reach a kind only through it, so neither holds a second apply path.
//!
//! What lower layers need of a kind (its name, its actions' `f`, whether it stops nodes, its
//! report colour) is on `history::FaultKind`, below the nemesis; adding a kind is a variant
//! there, one file here and one row in [`FAULTS`] (docs/architecture.md lists the steps).

pub mod clock;
pub mod corrupt;
pub mod frames;
pub mod kill;
pub mod packet;
pub mod partition;
pub mod pause;
pub mod power_loss;
pub mod reconfig;

use super::raw_fault::RawFault;
use super::schedule::{FaultTemplate, Grudge, PlannedFault, TargetSpec};
use super::seam::NemesisContext;
use super::targets::{resolve, Ensemble, Resolved};
use crate::history::situation::Who;
use crate::history::{EventType, FaultKind, FaultValue, F, NEMESIS};
use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A kind of fault, done to a real cluster or to the simulated world.
pub trait Fault: Sync {
    fn kind(&self) -> FaultKind;

    /// Whom it aims at, for steering (`steer::aims`): the role its target names.
    fn whom(&self, t: &FaultTemplate) -> Option<Who> {
        crate::nemesis::steer::named_by(&t.target)
    }

    /// What it needs of the machine, beyond running nodes.
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// Whom it hits when it starts (the leader, a minority, ...), from its target.
    fn targets(
        &self,
        spec: &TargetSpec,
        ens: Ensemble,
        leader: Option<&str>,
        pick: u64,
    ) -> Resolved {
        resolve(spec, ens, leader, pick)
    }

    /// Does it to a real cluster, recording it (invoke, then info or fail); the error says why
    /// nothing was done.
    fn apply(&self, ctx: &NemesisContext, order: &Order) -> Result<Active>;

    /// Undoes it on a real cluster, recording it; errors are recorded, never raised.
    fn undo(&self, ctx: &NemesisContext, active: &Active);

    /// The final phase's undo of this kind on every node, whatever is in force (`final`). The
    /// kinds that stop nodes have none: the final phase starts every node that is down
    /// (`kill::start_down_nodes`) once for all of them.
    fn heal_all(&self, _ctx: &NemesisContext, _nodes: &[String]) {}

    /// Does it to the simulated world; `value` (the base value) gains what it did. Returns the
    /// nodes it holds until its undo.
    fn apply_sim(
        &self,
        w: &mut dyn SimWorld,
        order: &Order,
        id: u64,
        value: &mut Value,
    ) -> Vec<String>;

    /// Undoes it in the simulated world (`id` 0: the final heal's, of every fault of the kind).
    fn undo_sim(&self, w: &mut dyn SimWorld, nodes: &[String], id: u64);

    /// What of this kind the final heal left on `node`, one line each (the heal's check of a
    /// real cluster asks the kinds its schedule has).
    fn left_on(&self, _ctx: &NemesisContext, _node: &str) -> Vec<String> {
        Vec::new()
    }

    /// Why the simulator cannot model this fault as set (None: it can); a simulated run
    /// refuses such a schedule before it starts.
    fn cannot_simulate(&self, _t: &FaultTemplate) -> Option<&'static str> {
        None
    }

    /// The schedule keys that only some kinds take which this one does ([`KIND_KEYS`]); a
    /// table giving a key its kind does not take is refused, naming the kinds that do.
    fn keys(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its settings when the schedule names none (`--nemesis KIND`, a bare `[[fault]]`);
    /// `t` comes with a random target and nothing of any kind's own.
    fn defaults(&self, _t: &mut FaultTemplate) {}

    /// Reads its own keys (those in [`Fault::keys`]) of a `[[fault]]` table into `t`; the
    /// error is one line naming the key and the fix.
    fn read_keys(&self, _raw: &RawFault, _t: &mut FaultTemplate) -> Result<(), String> {
        Ok(())
    }

    /// A timed `[[step]]` of this kind made exact, so a replay does the same every time: what
    /// the step-only keys give (`drops`, `links`), and a refusal of what would be drawn or
    /// resolved at run time. By default the step must name its nodes.
    fn exact_step(&self, t: &mut FaultTemplate, _step: &StepKeys) -> Result<(), String> {
        names_its_nodes(t)
    }

    /// Its lines of a timed step, between `kind` and `duration`: whom it hits and its settings,
    /// as [`Fault::read_keys`] and [`Fault::exact_step`] read them back.
    fn step_lines(&self, s: &PlannedFault) -> String {
        target_line(&s.template)
    }

    /// The template that replays a recorded start of this kind (`t`: its defaults, on the
    /// nodes it hit); `Ok(None)`: nothing to replay. The error says why it cannot be replayed
    /// as it was.
    fn replayed(&self, t: FaultTemplate, _start: &RecordedStart) -> Replayed {
        Ok(Some(t))
    }
}

/// What [`Fault::replayed`] gives: the template replaying a start, none, or why not.
pub type Replayed = Result<Option<FaultTemplate>, String>;

/// The schedule keys of a `[[fault]]` or `[[step]]` that only some kinds take; each is in the
/// [`Fault::keys`] of at least one kind (test).
pub const KIND_KEYS: &[&str] = &[
    "shape", "port", "mode", "delta", "period", "factor", "percent", "delay", "jitter", "rate",
    "file", "role", "replace", "drops", "links",
];

/// The refusal of `key` in a table of a kind that does not take it: the kinds that do.
pub fn only_for(key: &str) -> String {
    let kinds: Vec<String> = FAULTS
        .iter()
        .filter(|f| f.keys().contains(&key))
        .map(|f| format!("\"{}\"", f.kind().name()))
        .collect();
    let list = match kinds.as_slice() {
        [] => "none".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    };
    format!("{key} is only for kind = {list}")
}

/// The keys only a timed `[[step]]` has, parsed, and which of the fault's keys it gave.
#[derive(Debug, Default)]
pub struct StepKeys {
    /// `drops = { n1 = ["n3"] }`: an exact grudge (node -> the nodes whose traffic it drops).
    pub drops: Option<Grudge>,
    /// `links = [["n1", "n2"]]`: directed links, kept as a grudge (to -> froms).
    pub links: Option<Grudge>,
    pub target_given: bool,
    pub shape_given: bool,
}

/// A recorded start, as a replay reads it: its typed value, and its history line for what
/// its kind's file recorded beyond it.
pub struct RecordedStart<'a> {
    pub value: &'a FaultValue,
    /// The start's line as the history holds it (empty: no done start was recorded).
    pub line: &'a str,
    /// The recorded run's nodes.
    pub nodes: &'a [String],
}

/// A step names its nodes: roles such as the leader are resolved at run time.
pub fn names_its_nodes(t: &FaultTemplate) -> Result<(), String> {
    match t.target {
        TargetSpec::Nodes(_) => Ok(()),
        _ => Err(format!(
            "target = \"{}\": a step names its nodes (target = \"n1\" or \"n1,n3\"); roles such as \
             the leader are resolved by [[fault]] schedules at run time",
            t.target.describe()
        )),
    }
}

/// `target = "n1,n3"` of a step on named nodes (nothing for another target).
pub fn target_line(t: &FaultTemplate) -> String {
    match &t.target {
        TargetSpec::Nodes(n) => format!("target = \"{}\"\n", n.join(",")),
        _ => String::new(),
    }
}

/// Every kind, in `FaultKind::ALL`'s order.
pub const FAULTS: [&dyn Fault; 9] = [
    &kill::Kill,
    &pause::Pause,
    &partition::Partition,
    &clock::Clock,
    &power_loss::PowerLoss,
    &corrupt::Corrupt,
    &packet::Packet,
    &frames::Frames,
    &reconfig::Reconfig,
];

/// The kind's entry in [`FAULTS`].
pub fn of(kind: FaultKind) -> &'static dyn Fault {
    *FAULTS
        .iter()
        .find(|f| f.kind() == kind)
        .expect("every FaultKind has a row in FAULTS")
}

/// What a kind needs of the machine (the run's preflight and plan read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Nodes with their own network stack and iptables (namespaces, or hosts over SSH).
    pub net: bool,
    /// A FUSE mount between the node and its disk (lazyfs).
    pub fuse: bool,
    /// A clock the controller may move (libfaketime, or hosts' clocks over SSH).
    pub clock: bool,
}

/// One fault about to start: the planned fault, the cluster as the nemesis sees it, whom the
/// fault's target resolved to, and the value every record of it starts with.
pub struct Order<'a> {
    pub fault: &'a PlannedFault,
    pub ens: Ensemble<'a>,
    pub leader: Option<&'a str>,
    pub resolved: &'a Resolved,
    pub base: &'a Value,
}

impl Order<'_> {
    /// The nodes the fault's target named.
    pub fn nodes(&self) -> &[String] {
        &self.resolved.nodes
    }
}

/// A fault in force on a real cluster, with what its undo needs: the nodes it holds and what
/// its kind keeps (a packet fault's engines, a strobed clock's period), which only its kind's
/// file reads.
#[derive(Debug, Clone)]
pub struct Active {
    pub kind: FaultKind,
    nodes: Vec<String>,
    /// Which fault this is, among the run's (a composition undoes its parts by it).
    pub id: u64,
    held: Option<Arc<dyn Any + Send + Sync>>,
}

impl Active {
    pub fn new(kind: FaultKind, nodes: Vec<String>) -> Active {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Active {
            kind,
            nodes,
            id,
            held: None,
        }
    }

    /// With what its kind keeps until the undo.
    pub fn holding<T: Any + Send + Sync>(mut self, held: T) -> Active {
        self.held = Some(Arc::new(held));
        self
    }

    /// What its kind keeps, if it is a `T`.
    pub fn held<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.held.as_deref()?.downcast_ref()
    }

    /// The nodes it holds (a composition's `main` nodes, for its parts).
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Undoes it on a real cluster (its kind's undo).
    pub fn undo(&self, ctx: &NemesisContext) {
        of(self.kind).undo(ctx, self)
    }
}

/// A simulated server's process: running, stopped by SIGSTOP, or not running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    Up,
    Paused,
    Down,
}

/// What the simulated world offers a fault: the same acts a real cluster's `Target`,
/// `Control` and clocks offer, on simulated processes, links, disks and clocks.
pub trait SimWorld {
    /// Virtual time, in ns.
    fn now(&self) -> u64;
    fn life(&self, sid: u64) -> Life;
    fn kill(&mut self, sid: u64);
    fn start(&mut self, sid: u64);
    fn pause(&mut self, sid: u64);
    fn resume(&mut self, sid: u64);
    /// Forgets what `sid`'s disk had not synced (the last write torn at a drawn byte); the
    /// bytes lost, or None for a server without a disk.
    fn lose_power(&mut self, sid: u64) -> Option<usize>;
    /// Damages `sid`'s data file at a seeded place: what was done, or why it could not be.
    fn corrupt(&mut self, sid: u64, seed: u64) -> Option<Result<Value, String>>;
    /// `to` drops what `from` sends (only the Zab connections when `quorum_only`), as fault `id`.
    fn cut(&mut self, id: u64, from: u64, to: u64, quorum_only: bool);
    /// The link `from` -> `to` degraded by `mode`, as fault `id`.
    fn degrade(
        &mut self,
        id: u64,
        from: u64,
        to: u64,
        mode: crate::control::fault::packet::PacketMode,
    );
    /// Fault `id`'s cuts and degraded links removed (`id` 0: none of them), and what waited
    /// on a cut election link released.
    fn heal_links(&mut self, id: u64);
    /// `sid`'s wall clock under a clock fault, or back at +0 (None).
    fn set_clock(&mut self, sid: u64, skew: Option<clock::ClockSkew>);
}

/// Records an undo as `invoke`, then `info`, or `fail` naming the nodes `undo` could not put
/// right (its map of node -> error).
pub(crate) fn record_undo(
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

/// Runs `op` on every node (kill, pause, start, resume) and records invoke + info with the pids.
pub(crate) fn signal_all(
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
        return Ok(());
    }
    value["errors"] = json!(errors);
    // Partly done is still done: record what happened; fail only if nothing happened.
    let kind = match pids.is_empty() {
        true => EventType::Fail,
        false => EventType::Info,
    };
    ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
    match pids.is_empty() {
        true => Err(anyhow!("no node was affected")),
        false => Ok(()),
    }
}

/// Records how a fault done node by node ended: `errors` (node -> why) join its value; `info`
/// when it did something, else `fail` and the error `nothing` says.
pub(crate) fn record_outcome(
    ctx: &NemesisContext,
    (f, nodes): (F, &[String]),
    mut value: Value,
    errors: BTreeMap<String, String>,
    (done, nothing): (bool, &str),
) -> Result<()> {
    if !errors.is_empty() {
        value["errors"] = json!(errors);
    }
    let kind = if done {
        EventType::Info
    } else {
        EventType::Fail
    };
    ctx.recorder.record(NEMESIS, kind, f, single(nodes), value);
    match done {
        true => Ok(()),
        false => Err(anyhow!("{nothing}")),
    }
}

/// Starts `nodes` again (the undo of the kinds that stop a node), recorded with `value`.
pub(crate) fn start_again(ctx: &NemesisContext, nodes: &[String], value: &Value) {
    let _ = signal_all(ctx, nodes, F::Start, value, |n| {
        ctx.target.start(n).map(Some)
    });
}

/// The simulated servers `nodes` name that are not down (what a kill can stop).
pub(crate) fn sim_running(w: &dyn SimWorld, nodes: &[String]) -> Vec<String> {
    let running = |n: &&String| crate::history::sid_of(n).is_some_and(|s| w.life(s) != Life::Down);
    nodes.iter().filter(running).cloned().collect()
}

/// Starts the simulated `nodes` that are down.
pub(crate) fn sim_start_again(w: &mut dyn SimWorld, nodes: &[String]) {
    for s in nodes.iter().filter_map(|n| crate::history::sid_of(n)) {
        if w.life(s) == Life::Down {
            w.start(s);
        }
    }
}

/// A node's entry in a fault's per-node map (`lost`, `damage`, `errors`).
pub(crate) fn insert(map: &mut Map<String, Value>, sid: u64, v: Value) {
    map.insert(crate::history::node_name(sid), v);
}

/// The `node` field of an event about `nodes`: set only when it is one node.
pub(crate) fn single(nodes: &[String]) -> Option<&str> {
    match nodes {
        [one] => Some(one.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{of, only_for, FAULTS, KIND_KEYS};
    use crate::history::FaultKind;

    #[test]
    fn every_key_of_a_kind_is_a_kind_key_and_every_kind_key_has_a_kind() {
        for f in FAULTS {
            for key in f.keys() {
                assert!(KIND_KEYS.contains(key), "{:?} takes {key}", f.kind());
            }
        }
        for key in KIND_KEYS {
            assert!(FAULTS.iter().any(|f| f.keys().contains(key)), "{key}");
        }
        assert_eq!(only_for("port"), "port is only for kind = \"partition\"");
        assert_eq!(
            only_for("mode"),
            "mode is only for kind = \"clock\", \"packet\" or \"frames\""
        );
    }

    #[test]
    fn every_kind_has_one_row_in_its_order() {
        let kinds: Vec<FaultKind> = FAULTS.iter().map(|f| f.kind()).collect();
        assert_eq!(kinds, FaultKind::ALL);
        for kind in FaultKind::ALL {
            assert_eq!(of(kind).kind(), kind);
        }
    }
}
