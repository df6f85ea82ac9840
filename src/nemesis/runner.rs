//! The nemesis loop, one for real and simulated runs: walks the seeded plan, applying each
//! fault at its time and undoing it after its duration, until the run stops. Steered (the
//! default), it first brings forward a fault aimed at what the run has not met (`steer`); a
//! fault dealt for its goal waits until the cluster settled and then for its goal's phase; a
//! triggered fault (`when`) first waits for its observation (`trigger`); a composed one applies
//! and undoes its parts on their own clocks within its span. What it acts on and reads is an
//! environment (`env::NemesisEnv`): a real cluster under tokio (`live`) or the simulated
//! world under virtual time (`commands::sim::nemesis`), so both make the same choices from
//! the same observations. The final heal is the environment's (`live`, the simulator).

use super::env::{NemesisEnv, Steering};
use super::plan::{fault_window, plan, plan_ahead};
use super::schedule::{PlannedFault, Schedule, TargetSpec, DEFAULT_WAIT};
use super::steer::{self, Strategy};
use super::trigger::{Fired, Trigger, Watch};
use crate::history::situation::Phase;
use std::time::Duration;

/// How often a triggered or waiting fault looks at the latest reads (observers read at
/// >= 50 Hz).
pub const POLL: Duration = Duration::from_millis(5);

/// How long a fault dealt for its goal waits for the goal's phase.
const GOAL_WAIT: Duration = Duration::from_secs(8);

/// The shortest gap before a fault dealt for its goal, after the fault before it.
const MIN_GOAL_GAP: Duration = Duration::from_millis(500);

/// Runs `schedule`'s plan for `seed` on `env` until the run stops (the faults in force then
/// are the final heal's).
pub async fn run_plan<E: NemesisEnv>(
    env: &mut E,
    schedule: &Schedule,
    seed: u64,
    time_limit: Duration,
    steering: &Steering,
) {
    let window_end = fault_window(time_limit);
    let steered = steering.strategy == Strategy::Steered && schedule.timed.is_none();
    let ahead = steer::lookahead(schedule.faults.len());
    let mut planned = match steered {
        // Two deals in reserve: a goal missed once has its entry's next copy to try.
        true => plan_ahead(schedule, seed, window_end, 2 * ahead),
        false => plan(schedule, seed, window_end),
    };
    // When the last fault was undone: a trigger's wait delays the faults after it, which keep
    // their drawn gap.
    let mut free_at = Duration::ZERO;
    let mut quiet_after = Duration::ZERO;
    for i in 0..planned.len() {
        if steered {
            let place = Place {
                free_at,
                window_end,
                quiet_after,
                goal_gap: schedule.interval,
            };
            steer_place(env, &mut planned, i, ahead, steering, place);
        }
        let mut fault = planned[i].clone();
        let mark = env.situations_mark();
        quiet_after = fault.template.quiet_after;
        // Steered, the plan's start times belonged to the faults it had drawn for those
        // places: the fault keeps its place's gap after the one that really ran before it.
        let at = match steered {
            true => free_at + fault.gap,
            false => fault.start.max(free_at + fault.gap),
        };
        let for_goal = steered && fault.annotations.contains_key("goal");
        if !for_goal && at + fault.span() > window_end {
            break;
        }
        let waited = if fault.template.when.is_some() {
            wait_for_trigger(env, &mut fault, free_at, at, window_end).await
        } else if for_goal {
            wait_to_settle(env, &mut fault, free_at, schedule.interval, window_end).await
        } else {
            env.sleep_until(at).await
        };
        if waited || wait_for_goal_phase(env, &mut fault, window_end).await {
            break;
        }
        if schedule.timed.is_none() {
            // Recorded as `at_ms`: when it really started, which anchors a replay's times.
            // The plan's time belonged to the place a steered fault took, and a trigger or a
            // goal's wait moves it later.
            fault.start = env.now();
        }
        let stopped = match fault.parts.is_empty() {
            true => single(env, &fault).await,
            false => composed(env, &fault).await,
        };
        free_at = env.now();
        if let Some(g) = &fault.template.goal {
            // Its own faults' situations (one fault and its parts at a time): met or not.
            let met = env.met_since(mark).iter().any(|s| g.met_by(s));
            planned[i]
                .annotations
                .insert(steer::GOAL_MET.into(), met.into());
        }
        if stopped {
            break;
        }
    }
    env.stopped().await;
}

/// Where the next fault's place stands in the run, for steering.
#[derive(Debug, Clone, Copy)]
struct Place {
    free_at: Duration,
    window_end: Duration,
    quiet_after: Duration,
    /// The longest gap a goal's fault had (the schedule's `interval`).
    goal_gap: Duration,
}

/// Brings forward to place `i` the fault steering chooses from what the run met so far.
fn steer_place<E: NemesisEnv>(
    env: &E,
    planned: &mut [PlannedFault],
    i: usize,
    ahead: usize,
    steering: &Steering,
    p: Place,
) {
    let met = env.situations_met();
    let gap = planned[i].gap.min(p.goal_gap).max(p.quiet_after);
    let seen = steer::Seen {
        met: &met,
        before: &steering.met_before,
        writes: steering.writes,
        room: p.window_end.saturating_sub(p.free_at + gap),
        goal_room: p.window_end.saturating_sub(p.free_at + MIN_GOAL_GAP),
        goal_gap: p.goal_gap,
    };
    steer::bring_forward(planned, i, ahead, seen, p.quiet_after);
}

/// A triggered fault watches from the end of the one before (the re-election that a heal or
/// restart sets off is what it aims at), after that one's quiet, until `wait` after its
/// planned time `at`; it is aimed at what fired it (or marked missed). True if stopped.
async fn wait_for_trigger<E: NemesisEnv>(
    env: &mut E,
    fault: &mut PlannedFault,
    free_at: Duration,
    at: Duration,
    window_end: Duration,
) -> bool {
    let Some(trigger) = fault.template.when else {
        return false;
    };
    if env.sleep_until(free_at + fault.quiet).await {
        return true;
    }
    let wait = fault.template.wait.unwrap_or(DEFAULT_WAIT);
    let until = (at + wait).min(window_end.saturating_sub(fault.span()));
    let among = watched(env, fault, &[]);
    match wait_for(env, trigger, until, among).await {
        Waited::Stopped => return true,
        Waited::Fired(fired) => aim(fault, trigger, Some(fired)),
        Waited::TimedOut => aim(fault, trigger, None),
    }
    false
}

/// A fault dealt for its goal starts once the cluster settled again (a leader, every node
/// that is up rejoined it: the state every goal's situation starts from), not after its whole
/// drawn gap: a 60 s run spent a third of its window in gaps and dealt six of `mixed`'s nine
/// goals. At least MIN_GOAL_GAP after the fault before, at most the schedule's `interval` (the
/// longest gap a goal's fault had) or that fault's `quiet_after` when longer: a cluster that
/// does not settle (a server that cannot rejoin) is watched as long as before, and one that
/// settled has nothing left to show. True if stopped, or if the fault no longer fits.
async fn wait_to_settle<E: NemesisEnv>(
    env: &mut E,
    fault: &mut PlannedFault,
    free_at: Duration,
    interval: Duration,
    window_end: Duration,
) -> bool {
    if env.sleep_until(free_at + MIN_GOAL_GAP).await {
        return true;
    }
    let latest = free_at + interval.max(fault.quiet).max(MIN_GOAL_GAP);
    let Some(settled) = poll_until(env, latest, |e| e.settled_since(free_at)).await else {
        return true;
    };
    let key = match settled {
        true => "gap_ms",
        false => "gap_unsettled_ms",
    };
    let gap = env.now().saturating_sub(free_at);
    (fault.annotations).insert(key.into(), (gap.as_millis() as u64).into());
    env.now() + fault.span() > window_end
}

/// A fault dealt for its goal lands in the goal's phase (an election just ended is "after
/// NEWLEADER", not "after an ACK"), or after GOAL_WAIT anyway (marked missed). True if stopped.
async fn wait_for_goal_phase<E: NemesisEnv>(
    env: &mut E,
    fault: &mut PlannedFault,
    window_end: Duration,
) -> bool {
    let Some(phase) = goal_phase(fault) else {
        return false;
    };
    let waited = env.now();
    let until = (waited + GOAL_WAIT).min(window_end.saturating_sub(fault.span()));
    let a = &mut fault.annotations;
    match poll_until(env, until, |e| e.phase_now() == phase).await {
        None => return true,
        Some(true) => a.insert("goal_wait_ms".into(), ms(env.now() - waited).into()),
        Some(false) => a.insert("goal_missed".into(), true.into()),
    };
    false
}

/// One fault: apply, hold, undo. True if stopped.
async fn single<E: NemesisEnv>(env: &mut E, fault: &PlannedFault) -> bool {
    let Some(applied) = env.apply(fault) else {
        return false;
    };
    let stopped = hold(env, fault, &applied).await;
    env.undo(applied);
    stopped
}

/// A composed fault: the main one and each part applied at their starts and undone after their
/// durations, in time order (a strobed clock in a composition stays at its delta). True if
/// stopped; the parts applied by then are undone at once.
async fn composed<E: NemesisEnv>(env: &mut E, fault: &PlannedFault) -> bool {
    let t0 = env.now();
    let mut main = fault.clone();
    main.parts.clear();
    // Parts count from the main fault's start; the main's own `start` is its plan time.
    main.start = Duration::ZERO;
    let all: Vec<PlannedFault> = std::iter::once(main)
        .chain(fault.parts.iter().cloned())
        .collect();
    // (when, apply?, which): at one moment, undos before applies.
    let mut steps: Vec<(Duration, bool, usize)> = Vec::new();
    for (i, f) in all.iter().enumerate() {
        steps.push((t0 + f.start, true, i));
        steps.push((t0 + f.start + f.duration, false, i));
    }
    steps.sort_by_key(|(t, apply, i)| (*t, *apply, *i));
    let mut applied: Vec<Option<E::Applied>> = (0..all.len()).map(|_| None).collect();
    // The nodes the main fault hit (`target = "main"` / `"others"` of the parts).
    let mut main_nodes: Vec<String> = Vec::new();
    let mut stopped = false;
    for (when, apply, i) in steps {
        if !stopped && env.sleep_until(when).await {
            stopped = true;
        }
        if !apply {
            if let Some(a) = applied[i].take() {
                env.undo(a);
            }
            continue;
        }
        if stopped {
            continue;
        }
        let mut f = all[i].clone();
        if i > 0 {
            let undo_at = t0 + f.start + f.duration;
            if aim_part(env, &mut f, fault, &main_nodes, t0, undo_at).await {
                stopped = true;
                continue;
            }
        }
        // Recorded from the nemesis's start (`at_ms`), as a single fault is.
        f.start += fault.start;
        applied[i] = env.apply(&f);
        if let (0, Some(a)) = (i, &applied[i]) {
            main_nodes = E::hit(a);
        }
    }
    stopped
}

/// Aims a composed part before it is applied: a part with its own trigger waits from its
/// start for the observation, at most `wait` and never past its undo (the span stays as
/// planned; steps due meanwhile follow when it fires); one without is aimed at the node that
/// fired the main fault (`target = "trigger"`); then `main` and `others` are resolved. True
/// if stopped.
async fn aim_part<E: NemesisEnv>(
    env: &mut E,
    part: &mut PlannedFault,
    main: &PlannedFault,
    main_nodes: &[String],
    t0: Duration,
    undo_at: Duration,
) -> bool {
    if let Some(trigger) = part.template.when {
        let wait = part.template.wait.unwrap_or(DEFAULT_WAIT);
        let until = (t0 + part.start + wait).min(undo_at);
        let among = watched(env, part, main_nodes);
        match wait_for(env, trigger, until, among).await {
            Waited::Stopped => return true,
            Waited::Fired(fired) => aim(part, trigger, Some(fired)),
            Waited::TimedOut => aim(part, trigger, None),
        }
    } else {
        aim_at_main_trigger(part, main);
    }
    let nodes = composition_nodes_of(env, &part.template.target, main_nodes);
    point_at(part, nodes);
    false
}

/// Keeps the fault in force for its duration (flipping a strobed clock); true if stopped.
async fn hold<E: NemesisEnv>(env: &mut E, fault: &PlannedFault, applied: &E::Applied) -> bool {
    let end = env.now() + fault.duration;
    let Some((delta_ms, period)) = env.strobe(applied) else {
        return env.sleep_until(end).await;
    };
    let mut skewed = true;
    loop {
        let next = (env.now() + period).min(end);
        if env.sleep_until(next).await {
            return true;
        }
        if next >= end {
            return false;
        }
        skewed = !skewed;
        env.flip(applied, if skewed { delta_ms } else { 0 });
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
async fn wait_for<E: NemesisEnv>(
    env: &mut E,
    trigger: Trigger,
    until: Duration,
    among: Option<Vec<String>>,
) -> Waited {
    let mut watch = env.observations(|o| Watch::new(trigger, o));
    if let Some(nodes) = among {
        watch = watch.among(nodes);
    }
    loop {
        if let Some(fired) = env.observations(|o| watch.poll(o)) {
            return Waited::Fired(fired);
        }
        let next = env.now() + POLL;
        if next > until {
            return Waited::TimedOut;
        }
        if env.sleep_until(next).await {
            return Waited::Stopped;
        }
    }
}

/// Polls `done` every POLL: Some(true) once it holds, Some(false) when `until` passes first,
/// None when the run stops.
async fn poll_until<E: NemesisEnv>(
    env: &mut E,
    until: Duration,
    done: impl Fn(&E) -> bool,
) -> Option<bool> {
    loop {
        if done(env) {
            return Some(true);
        }
        let next = env.now() + POLL;
        if next > until {
            return Some(false);
        }
        if env.sleep_until(next).await {
            return None;
        }
    }
}

/// The phase a fault waits for: its goal's, when its goal chose it (`steer`) and neither it
/// nor a part has a trigger of its own (a triggered part aims at its own moment, which the
/// goal's phase names; the main fault must not wait for it).
fn goal_phase(f: &PlannedFault) -> Option<Phase> {
    let triggered = std::iter::once(f)
        .chain(&f.parts)
        .any(|p| p.template.when.is_some());
    let chosen = f.annotations.contains_key("goal") && !triggered;
    chosen.then(|| f.template.goal.as_ref()?.phase).flatten()
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The nodes whose reads may fire `f`'s trigger, resolved as its wait begins: its `watch`, or
/// for a part aimed at `main` the main fault's nodes (it waits for one of them, not for
/// whichever node shows the moment first); None: any node's. Recorded with the fault
/// (`watched`): an empty set (the main fault hit nothing) can only time out.
fn watched<E: NemesisEnv>(
    env: &E,
    f: &mut PlannedFault,
    main_nodes: &[String],
) -> Option<Vec<String>> {
    let pick = f.pick;
    let spec = match (&f.template.watch, &f.template.target) {
        (Some(spec), _) | (None, spec @ TargetSpec::Main) => spec.clone(),
        _ => return None,
    };
    let nodes = composition_nodes_of(env, &spec, main_nodes)
        .unwrap_or_else(|| env.resolve_now(&spec, pick));
    f.annotations.insert("watched".into(), nodes.clone().into());
    Some(nodes)
}

/// A composition's `main` or `others` nodes in `env` now ([`composition_nodes`]).
fn composition_nodes_of<E: NemesisEnv>(
    env: &E,
    spec: &TargetSpec,
    main_nodes: &[String],
) -> Option<Vec<String>> {
    composition_nodes(spec, main_nodes, &env.nodes(), |n| env.is_running(n))
}

/// Marks `fault` with what fired it (recorded in its value) and points `target = "trigger"`
/// (its own and its parts') at the node the read named. A trigger not seen in time fires the
/// fault anyway, marked `trigger_missed`, so the run still tests something.
fn aim(fault: &mut PlannedFault, trigger: Trigger, fired: Option<Fired>) {
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

/// A composition's `main` nodes (those its main fault hit) or `others` (those of `nodes`
/// still running that it did not); None for any other target. The simulator's compositions
/// resolve theirs with it too.
fn composition_nodes(
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

/// Points a part at `nodes`, its composition's (`composition_nodes`), when there are any
/// (nothing to aim at, the main fault hit nothing: the fallback in `targets` says so).
fn point_at(part: &mut PlannedFault, nodes: Option<Vec<String>>) {
    if let Some(nodes) = nodes.filter(|n| !n.is_empty()) {
        part.template.target = TargetSpec::Nodes(nodes);
    }
}

/// Points a part aimed at `trigger` (with no trigger of its own) at the node whose read fired
/// its composition's main fault.
fn aim_at_main_trigger(part: &mut PlannedFault, main: &PlannedFault) {
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
