//! The scheduled nemesis: walks the seeded plan, applying each fault at its time and undoing it
//! after its duration, until the run's time is up; then the final heal undoes everything and
//! verifies it. A triggered fault (`when`) first waits for its observation (`trigger`); a
//! composed one applies and undoes its parts on their own clocks within its span.

use super::faults::{self, clock::Strobe, Active};
use super::inject;
use super::plan::{fault_window, plan, plan_ahead};
use super::schedule::PlannedFault;
use super::schedule::{Schedule, TargetSpec, DEFAULT_WAIT};
use super::seam::{Nemesis, NemesisContext};
use super::steer::{self, Strategy};
use super::trigger::{Fired, Trigger, Watch};
use crate::control::fault::clock::ClockSetting;
use crate::control::fault::iptables::CHAIN;
use crate::control::sut::BoxFuture;
use crate::history::{EventType, F, NEMESIS};
use anyhow::Result;
use serde_json::json;
use std::sync::Mutex;

use tokio::time::Instant;

/// A nemesis driven by a `Schedule` and the run's seed.
pub struct ScheduledNemesis {
    pub schedule: Schedule,
    /// The faults in force (several for a composed one), so that the final heal undoes them
    /// even if `run` was cut short.
    active: Mutex<Vec<Active>>,
}

/// How often a triggered fault looks at the observers' latest reads (they read at >= 50 Hz).
const TRIGGER_POLL: std::time::Duration = std::time::Duration::from_millis(5);

impl ScheduledNemesis {
    pub fn new(schedule: Schedule) -> Self {
        ScheduledNemesis {
            schedule,
            active: Mutex::new(Vec::new()),
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the real run's nemesis loop (steer, wait for a trigger or goal, apply, hold, undo); the loop shared with the simulator will take it apart"
    )]
    async fn run_plan(&self, ctx: &NemesisContext) -> Result<()> {
        let mut stop = ctx.stop.clone();
        let start = Instant::now();
        let window_end = start + fault_window(ctx.time_limit);
        // When the last fault was undone: a trigger's wait delays the faults after it, which
        // keep their drawn gap.
        let mut free_at = start;
        // The same moment on the history's clock (reads after it judge a settled cluster).
        let mut free_ns = 0;
        let steered = ctx.settings.strategy == Strategy::Steered && self.schedule.timed.is_none();
        let ahead = steer::lookahead(self.schedule.faults.len());
        let window = fault_window(ctx.time_limit);
        let mut planned = match steered {
            // Two deals in reserve: a goal missed once has its entry's next copy to try.
            true => plan_ahead(&self.schedule, ctx.seed, window, 2 * ahead),
            false => plan(&self.schedule, ctx.seed, window),
        };
        let mut quiet_after = std::time::Duration::ZERO;
        for i in 0..planned.len() {
            if steered {
                let met = ctx.recorder.situations_met();
                let goal_gap = self.schedule.interval;
                let gap = planned[i].gap.min(goal_gap).max(quiet_after);
                let seen = steer::Seen {
                    met: &met,
                    before: &ctx.settings.met_before,
                    writes: ctx.settings.writes,
                    room: window_end.saturating_duration_since(free_at + gap),
                    goal_room: window_end.saturating_duration_since(free_at + MIN_GOAL_GAP),
                    goal_gap,
                };
                steer::bring_forward(&mut planned, i, ahead, seen, quiet_after);
            }
            let mut fault = planned[i].clone();
            let mark = ctx.recorder.situations_mark();
            quiet_after = fault.template.quiet_after;
            // Steered, the plan's start times belonged to the faults it had drawn for those
            // places: the fault keeps its place's gap after the one that really ran before it.
            let at = match steered {
                true => free_at + fault.gap,
                false => (start + fault.start).max(free_at + fault.gap),
            };
            let for_goal = steered && fault.annotations.contains_key("goal");
            if !for_goal && at + fault.span() > window_end {
                break;
            }
            if let Some(trigger) = fault.template.when {
                // A triggered fault watches from the end of the one before (the re-election
                // that a heal or restart sets off is what it aims at), after that one's
                // quiet, until `wait` after its planned time.
                if sleep_or_stop(&mut stop, free_at + fault.quiet).await {
                    break;
                }
                let wait = fault.template.wait.unwrap_or(DEFAULT_WAIT);
                let until = (at + wait).min(window_end - fault.span());
                let among = watched(ctx, &mut fault, &[]);
                match wait_for(ctx, &mut stop, trigger, until, among).await {
                    Waited::Stopped => break,
                    Waited::Fired(fired) => aim(&mut fault, trigger, Some(fired)),
                    Waited::TimedOut => aim(&mut fault, trigger, None),
                }
            } else if for_goal {
                // Dealt for its goal: it starts once the cluster settled again (a leader, every
                // node that is up rejoined it: the state every goal's situation starts from),
                // not after its whole drawn gap: a 60 s run spent a third of its window in
                // gaps and dealt six of `mixed`'s nine goals. At least MIN_GOAL_GAP after the
                // fault before, at most the schedule's `interval` (the longest gap a goal's
                // fault had) or that fault's `quiet_after` when longer: a cluster that does
                // not settle (a server that cannot rejoin) is watched as long as before, and
                // one that settled has nothing left to show.
                let earliest = free_at + MIN_GOAL_GAP;
                if sleep_or_stop(&mut stop, earliest).await {
                    break;
                }
                let latest = free_at + self.schedule.interval.max(fault.quiet).max(MIN_GOAL_GAP);
                match wait_until_settled(ctx, &mut stop, free_ns, latest).await {
                    None => break,
                    Some(settled) => {
                        let key = if settled {
                            "gap_ms"
                        } else {
                            "gap_unsettled_ms"
                        };
                        fault.annotations.insert(key.into(), ms(free_at).into());
                    }
                }
                if Instant::now() + fault.span() > window_end {
                    break;
                }
            } else if sleep_or_stop(&mut stop, at).await {
                break;
            }
            if let Some(phase) = goal_phase(&fault) {
                // Dealt for its goal: it lands in the goal's phase (an election just ended
                // is "after NEWLEADER", not "after an ACK"), or after GOAL_WAIT anyway.
                let until = (Instant::now() + GOAL_WAIT).min(window_end - fault.span());
                let waited = Instant::now();
                let a = &mut fault.annotations;
                match wait_for_phase(ctx, &mut stop, phase, until).await {
                    None => break,
                    Some(true) => a.insert("goal_wait_ms".into(), ms(waited).into()),
                    Some(false) => a.insert("goal_missed".into(), true.into()),
                };
            }
            if self.schedule.timed.is_none() {
                // Recorded as `at_ms`: when it really started, which anchors a replay's times.
                // The plan's time belonged to the place a steered fault took, and a trigger or
                // a goal's wait moves it later.
                fault.start = start.elapsed();
            }
            let stopped = if fault.parts.is_empty() {
                self.single(ctx, &mut stop, &fault).await
            } else {
                self.composed(ctx, &mut stop, &fault).await
            };
            free_at = Instant::now();
            free_ns = ctx.recorder.now();
            if let Some(g) = &fault.template.goal {
                // Its own faults' situations (one fault and its parts at a time): met or not.
                let met = ctx.recorder.met_since(mark).iter().any(|s| g.met_by(s));
                planned[i]
                    .annotations
                    .insert(steer::GOAL_MET.into(), met.into());
            }
            if stopped {
                break;
            }
        }
        let _ = stop.wait_for(|s| *s).await;
        Ok(())
    }

    /// One fault: apply, hold, undo. True if stopped.
    async fn single(
        &self,
        ctx: &NemesisContext,
        stop: &mut tokio::sync::watch::Receiver<bool>,
        fault: &PlannedFault,
    ) -> bool {
        let Some(active) = inject::apply(ctx, fault) else {
            return false;
        };
        self.active.lock().unwrap().push(active.clone());
        let stopped = self.hold(ctx, stop, fault, &active).await;
        inject::undo(ctx, &active);
        self.active.lock().unwrap().clear();
        stopped
    }

    /// A composed fault: the main one and each part applied at their starts and undone after
    /// their durations, in time order (a strobed clock in a composition stays at its delta).
    async fn composed(
        &self,
        ctx: &NemesisContext,
        stop: &mut tokio::sync::watch::Receiver<bool>,
        fault: &PlannedFault,
    ) -> bool {
        let t0 = Instant::now();
        let mut main = fault.clone();
        main.parts.clear();
        // Parts count from the main fault's start; the main's own `start` is its plan time.
        main.start = std::time::Duration::ZERO;
        let all: Vec<PlannedFault> = std::iter::once(main)
            .chain(fault.parts.iter().cloned())
            .collect();
        // (when, apply?, which)
        let mut steps: Vec<(Instant, bool, usize)> = Vec::new();
        for (i, f) in all.iter().enumerate() {
            steps.push((t0 + f.start, true, i));
            steps.push((t0 + f.start + f.duration, false, i));
        }
        steps.sort_by_key(|(t, apply, i)| (*t, *apply, *i));
        let mut actives: Vec<Option<Active>> = vec![None; all.len()];
        // The nodes the main fault hit (`target = "main"` / `"others"` of the parts).
        let mut main_nodes: Vec<String> = Vec::new();
        let mut stopped = false;
        for (when, apply, i) in steps {
            if !stopped && sleep_or_stop(stop, when).await {
                stopped = true;
            }
            if apply {
                if stopped {
                    continue;
                }
                let mut f = all[i].clone();
                if let Some(trigger) = f.template.when.filter(|_| i > 0) {
                    // A part with its own trigger waits from its start for the observation,
                    // at most `wait` and never past its undo (the span stays as planned);
                    // steps due meanwhile follow when it fires.
                    let wait = f.template.wait.unwrap_or(DEFAULT_WAIT);
                    let undo_at = t0 + f.start + f.duration;
                    let until = (t0 + f.start + wait).min(undo_at);
                    let among = watched(ctx, &mut f, &main_nodes);
                    match wait_for(ctx, stop, trigger, until, among).await {
                        Waited::Stopped => {
                            stopped = true;
                            continue;
                        }
                        Waited::Fired(fired) => aim(&mut f, trigger, Some(fired)),
                        Waited::TimedOut => aim(&mut f, trigger, None),
                    }
                } else if i > 0 {
                    aim_at_main_trigger(&mut f, fault);
                }
                if i > 0 {
                    aim_at_main(&mut f, ctx, &main_nodes);
                }
                // Recorded from the nemesis's start (`at_ms`), as a single fault is.
                f.start += fault.start;
                actives[i] = inject::apply(ctx, &f);
                if let Some(a) = &actives[i] {
                    if i == 0 {
                        main_nodes = a.nodes().to_vec();
                    }
                    self.active.lock().unwrap().push(a.clone());
                }
            } else if let Some(a) = actives[i].take() {
                inject::undo(ctx, &a);
                self.active.lock().unwrap().retain(|x| x.id != a.id);
            }
        }
        stopped
    }

    /// Keeps the fault in force for its duration (flipping strobed clocks); true if stopped.
    async fn hold(
        &self,
        ctx: &NemesisContext,
        stop: &mut tokio::sync::watch::Receiver<bool>,
        fault: &PlannedFault,
        active: &Active,
    ) -> bool {
        let end = Instant::now() + fault.duration;
        let Some(&Strobe { delta_ms, period }) = active.held::<Strobe>() else {
            return sleep_or_stop(stop, end).await;
        };
        let mut skewed = true;
        loop {
            let next = (Instant::now() + period).min(end);
            if sleep_or_stop(stop, next).await {
                return true;
            }
            if next >= end {
                return false;
            }
            skewed = !skewed;
            let setting = ClockSetting::Offset(if skewed { delta_ms } else { 0 });
            for node in active.nodes() {
                // One flip is one step per node (over SSH a round trip each); a failed flip is
                // put right by the reset at the end.
                if let Err(e) = faults::clock::set_clock(ctx, node, setting) {
                    tracing::warn!("strobe: cannot flip the clock of {node}: {e:#}");
                }
            }
        }
    }

    /// Undoes every fault, whatever the record says, then checks that nothing is left.
    fn heal_everything(&self, ctx: &NemesisContext) -> Result<()> {
        let active: Vec<Active> = std::mem::take(&mut *self.active.lock().unwrap());
        for a in active.iter().rev() {
            inject::undo(ctx, a);
        }
        let nodes = ctx.observations.nodes().to_vec();
        // Every node runs again first, then the other kinds are healed everywhere.
        let kinds = self.schedule.kinds();
        if kinds.iter().any(|k| k.stops_node()) {
            faults::kill::start_down_nodes(ctx, &nodes);
        }
        for kind in kinds.into_iter().filter(|k| !k.stops_node()) {
            faults::of(kind).heal_all(ctx, &nodes);
        }
        self.verify(ctx, &nodes);
        Ok(())
    }

    /// Records whether the cluster is really healed: every process running and not stopped,
    /// no tool chain left, every clock at +0.
    fn verify(&self, ctx: &NemesisContext, nodes: &[String]) {
        let partitions = self
            .schedule
            .kinds()
            .contains(&super::schedule::FaultKind::Partition);
        let net = ctx.control.net().filter(|_| partitions);
        let packets = ctx.control.net().filter(|_| {
            self.schedule
                .kinds()
                .contains(&super::schedule::FaultKind::Packet)
        });
        let mut problems = Vec::new();
        for node in nodes {
            // SIGCONT is harmless to a running process and the one way out of a stop.
            match ctx.target.resume(node) {
                Ok(Some(pid)) => match ctx.control.is_stopped(node) {
                    Ok(false) => {}
                    Ok(true) => problems.push(format!("{node} (pid {pid}) is still stopped")),
                    Err(e) => problems.push(format!("{node}: cannot tell if it is stopped: {e:#}")),
                },
                Ok(None) => problems.push(format!("{node} is not running")),
                Err(e) => problems.push(format!("{node}: cannot signal it: {e:#}")),
            }
            if let Some(net) = net {
                match net.is_cut(node) {
                    Ok(true) => problems.push(format!("{node} still has the {CHAIN} chain")),
                    Ok(false) => {}
                    Err(e) => {
                        problems.push(format!("{node}: cannot list its iptables rules: {e:#}"))
                    }
                }
            }
            if let Some(net) = packets {
                let in_netns = net.netns(node).is_some();
                match crate::control::fault::packet::leftovers(ctx.control.as_ref(), node, in_netns)
                {
                    Ok(left) => {
                        for l in left {
                            problems.push(format!("{node} still has {l}"));
                        }
                    }
                    Err(e) => {
                        problems.push(format!("{node}: cannot list its packet faults: {e:#}"))
                    }
                }
            }
            // Every clock that can be moved is checked, with or without clock faults: a
            // libfaketime file is set up by --faketime too, and a host clock left skewed by
            // an earlier run of the same folder would show here.
            let Some(clock) = ctx.target.clock() else {
                continue;
            };
            match clock.skew_left(node) {
                Ok(None) => {}
                Ok(Some(skew)) => problems.push(format!("{node}'s clock is at {skew}")),
                Err(e) => problems.push(format!("{node}: cannot read its clock skew: {e:#}")),
            }
        }
        let kind = if problems.is_empty() {
            EventType::Info
        } else {
            EventType::Fail
        };
        let value = json!({ "nodes": nodes, "final": true, "verify": true, "problems": problems });
        ctx.recorder.record(
            NEMESIS,
            EventType::Invoke,
            F::Heal,
            None,
            json!({ "nodes": nodes, "final": true, "verify": true }),
        );
        ctx.recorder.record(NEMESIS, kind, F::Heal, None, value);
    }
}

impl Nemesis for ScheduledNemesis {
    fn run<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.run_plan(ctx))
    }

    fn final_heal<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.heal_everything(ctx) })
    }
}

/// How a trigger's wait ended.
enum Waited {
    Fired(Fired),
    TimedOut,
    Stopped,
}

/// Waits until the observers' reads (of `among` only, when given) show `trigger`, `until`
/// passes, or the run stops.
async fn wait_for(
    ctx: &NemesisContext,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    trigger: Trigger,
    until: Instant,
    among: Option<Vec<String>>,
) -> Waited {
    let mut watch = Watch::new(trigger, &ctx.observations);
    if let Some(nodes) = among {
        watch = watch.among(nodes);
    }
    loop {
        if let Some(fired) = watch.poll(&ctx.observations) {
            return Waited::Fired(fired);
        }
        let next = Instant::now() + TRIGGER_POLL;
        if next > until {
            return Waited::TimedOut;
        }
        if sleep_or_stop(stop, next).await {
            return Waited::Stopped;
        }
    }
}

/// How long a fault dealt for its goal waits for the goal's phase.
const GOAL_WAIT: std::time::Duration = std::time::Duration::from_secs(8);

/// The phase a fault waits for: its goal's, when its goal chose it (`steer`) and neither it
/// nor a part has a trigger of its own (a triggered part aims at its own moment, which the
/// goal's phase names; the main fault must not wait for it).
fn goal_phase(f: &PlannedFault) -> Option<crate::history::situation::Phase> {
    let triggered = std::iter::once(f)
        .chain(&f.parts)
        .any(|p| p.template.when.is_some());
    let chosen = f.annotations.contains_key("goal") && !triggered;
    chosen.then(|| f.template.goal.as_ref()?.phase).flatten()
}

/// The shortest gap before a fault dealt for its goal, after the fault before it.
const MIN_GOAL_GAP: std::time::Duration = std::time::Duration::from_millis(500);

/// Waits until the run's live situation fold says `phase` (Some(true)), `until` passes
/// (Some(false)), or the run stops (None).
async fn wait_for_phase(
    ctx: &NemesisContext,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    phase: crate::history::situation::Phase,
    until: Instant,
) -> Option<bool> {
    poll_until(stop, until, || ctx.recorder.phase_now() == phase).await
}

/// Waits until the cluster settled (`View::settled`, on reads taken since `since_ns`)
/// (Some(true)), `until` passes (Some(false)), or the run stops (None).
async fn wait_until_settled(
    ctx: &NemesisContext,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    since_ns: u64,
    until: Instant,
) -> Option<bool> {
    let settled = || ctx.recorder.view(|v| v.settled(since_ns).is_settled());
    poll_until(stop, until, settled).await
}

/// Polls `done` every TRIGGER_POLL: Some(true) once it holds, Some(false) when `until`
/// passes first, None when the run stops.
async fn poll_until(
    stop: &mut tokio::sync::watch::Receiver<bool>,
    until: Instant,
    done: impl Fn() -> bool,
) -> Option<bool> {
    loop {
        if done() {
            return Some(true);
        }
        let next = Instant::now() + TRIGGER_POLL;
        if next > until {
            return Some(false);
        }
        if sleep_or_stop(stop, next).await {
            return None;
        }
    }
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// Marks `fault` with what fired it (recorded in its value) and points `target = "trigger"`
/// (its own and its parts') at the node the read named. A trigger not seen in time fires the
/// fault anyway, marked `trigger_missed`, so the run still tests something.
pub(crate) fn aim(fault: &mut PlannedFault, trigger: Trigger, fired: Option<Fired>) {
    let a = &mut fault.annotations;
    a.insert("trigger".into(), trigger.name().into());
    match fired {
        Some(f) => {
            a.insert("trigger_index".into(), f.index.into());
            a.insert("trigger_node".into(), f.node.clone().into());
            if fault.template.target == TargetSpec::Trigger {
                fault.template.target = TargetSpec::Nodes(vec![f.node]);
            }
        }
        None => {
            a.insert("trigger_missed".into(), true.into());
        }
    }
}

/// The nodes whose reads may fire `f`'s trigger, resolved as its wait begins: its `watch`,
/// or for a part aimed at `main` the main fault's nodes (it waits for one of them, not for
/// whichever node shows the moment first); None: any node's. Recorded with the fault
/// (`watched`): an empty set (the main fault hit nothing) can only time out.
fn watched(
    ctx: &NemesisContext,
    f: &mut PlannedFault,
    main_nodes: &[String],
) -> Option<Vec<String>> {
    let running = |n: &str| ctx.target.is_running(n);
    let (nodes, pick) = (ctx.observations.nodes(), f.pick);
    watched_nodes(f, |spec| {
        composition_nodes(spec, main_nodes, nodes, running)
            .unwrap_or_else(|| inject::resolve_now(ctx, spec, pick))
    })
}

/// [`watched`] for any runner (the simulator's too): `resolve` turns the spec watched into
/// nodes; the choice of spec and the record are here.
pub(crate) fn watched_nodes(
    f: &mut PlannedFault,
    resolve: impl FnOnce(&TargetSpec) -> Vec<String>,
) -> Option<Vec<String>> {
    let spec = match (&f.template.watch, &f.template.target) {
        (Some(spec), _) | (None, spec @ TargetSpec::Main) => spec.clone(),
        _ => return None,
    };
    let nodes = resolve(&spec);
    f.annotations.insert("watched".into(), nodes.clone().into());
    Some(nodes)
}

/// A composition's `main` nodes (those its main fault hit) or `others` (those of `nodes`
/// still running that it did not); None for any other target. The simulator's compositions
/// resolve theirs with it too.
pub(crate) fn composition_nodes(
    spec: &TargetSpec,
    main_nodes: &[String],
    nodes: &[String],
    running: impl Fn(&str) -> bool,
) -> Option<Vec<String>> {
    match spec {
        TargetSpec::Main => Some(main_nodes.to_vec()),
        TargetSpec::Others => Some(
            (nodes.iter())
                .filter(|n| !main_nodes.contains(n) && running(n))
                .cloned()
                .collect(),
        ),
        _ => None,
    }
}

/// Points a part's `main` target at the nodes its composition's main fault hit, and `others`
/// at the running nodes it did not (resolved when the part fires, after the parts before it).
fn aim_at_main(part: &mut PlannedFault, ctx: &NemesisContext, main_nodes: &[String]) {
    let running = |n: &str| ctx.target.is_running(n);
    let nodes = ctx.observations.nodes();
    let resolved = composition_nodes(&part.template.target, main_nodes, nodes, running);
    point_at(part, resolved);
}

/// Points a part at `nodes`, its composition's (`composition_nodes`), when there are any
/// (nothing to aim at, the main fault hit nothing: the fallback in `targets` says so).
pub(crate) fn point_at(part: &mut PlannedFault, nodes: Option<Vec<String>>) {
    if let Some(nodes) = nodes.filter(|n| !n.is_empty()) {
        part.template.target = TargetSpec::Nodes(nodes);
    }
}

/// Points a part aimed at `trigger` (with no trigger of its own) at the node whose read fired
/// its composition's main fault.
pub(crate) fn aim_at_main_trigger(part: &mut PlannedFault, main: &PlannedFault) {
    if part.template.target != TargetSpec::Trigger {
        return;
    }
    if let Some(node) = main
        .annotations
        .get("trigger_node")
        .and_then(|n| n.as_str())
    {
        part.template.target = TargetSpec::Nodes(vec![node.to_string()]);
    }
}

/// Sleeps until `until`; true if the stop signal came first (or was already given).
async fn sleep_or_stop(stop: &mut tokio::sync::watch::Receiver<bool>, until: Instant) -> bool {
    if *stop.borrow() {
        return true;
    }
    let stopped = tokio::select! {
        _ = tokio::time::sleep_until(until) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    stopped || *stop.borrow()
}
