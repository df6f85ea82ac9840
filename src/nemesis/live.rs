//! The nemesis of a real run: the shared loop (`super::runner`) on a live cluster, driven by
//! tokio's clock, and the final heal that undoes everything and verifies it.

use super::env::{verify_records, NemesisEnv};
use super::faults::{self, clock::Strobe, Active};
use super::inject;
use super::runner::run_plan;
use super::schedule::{PlannedFault, Schedule, TargetSpec};
use super::seam::{Nemesis, NemesisContext};
use crate::control::fault::clock::ClockSetting;
use crate::control::sut::BoxFuture;
use crate::history::situation::{Phase, Situation};
use crate::history::{F, NEMESIS};
use crate::workload::observe::Observations;
use anyhow::Result;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A nemesis driven by a `Schedule` and the run's seed.
pub struct ScheduledNemesis {
    pub schedule: Schedule,
    /// The faults in force (several for a composed one), so that the final heal undoes them
    /// even if `run` was cut short.
    active: Mutex<Vec<Active>>,
}

impl ScheduledNemesis {
    pub fn new(schedule: Schedule) -> Self {
        ScheduledNemesis {
            schedule,
            active: Mutex::new(Vec::new()),
        }
    }

    async fn run_plan(&self, ctx: &NemesisContext) -> Result<()> {
        let mut env = LiveEnv {
            ctx,
            stop: ctx.stop.clone(),
            start: Instant::now(),
            history_start: ctx.recorder.now(),
            active: &self.active,
        };
        let steering = &ctx.settings.steering;
        run_plan(&mut env, &self.schedule, ctx.seed, ctx.time_limit, steering).await;
        Ok(())
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
        let kinds = self.schedule.kinds();
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
            for &kind in &kinds {
                problems.extend(faults::of(kind).left_on(ctx, node));
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
        for (kind, value) in verify_records(nodes, problems) {
            ctx.recorder.record(NEMESIS, kind, F::Heal, None, value);
        }
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

/// A live cluster as the nemesis loop sees it: the run's target, control, recorder and
/// observations, tokio's clock and the run's stop signal.
struct LiveEnv<'a> {
    ctx: &'a NemesisContext,
    stop: watch::Receiver<bool>,
    /// When the nemesis started (its times count from here).
    start: Instant,
    /// The same moment on the history's clock.
    history_start: u64,
    /// The faults in force, shared with the final heal.
    active: &'a Mutex<Vec<Active>>,
}

impl NemesisEnv for LiveEnv<'_> {
    type Applied = Active;

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    async fn sleep_until(&mut self, at: Duration) -> bool {
        sleep_or_stop(&mut self.stop, self.start + at).await
    }

    async fn stopped(&mut self) {
        let _ = self.stop.wait_for(|s| *s).await;
    }

    fn apply(&mut self, fault: &PlannedFault) -> Option<Active> {
        let active = inject::apply(self.ctx, fault)?;
        self.active.lock().unwrap().push(active.clone());
        Some(active)
    }

    fn undo(&mut self, applied: Active) {
        inject::undo(self.ctx, &applied);
        self.active.lock().unwrap().retain(|a| a.id != applied.id);
    }

    fn hit(applied: &Active) -> Vec<String> {
        applied.nodes().to_vec()
    }

    fn strobe(&self, applied: &Active) -> Option<(i64, Duration)> {
        let &Strobe { delta_ms, period } = applied.held::<Strobe>()?;
        Some((delta_ms, period))
    }

    fn flip(&mut self, applied: &Active, offset_ms: i64) {
        for node in applied.nodes() {
            // One flip is one step per node (over SSH a round trip each); a failed flip is put
            // right by the reset at the end.
            let setting = ClockSetting::Offset(offset_ms);
            if let Err(e) = faults::clock::set_clock(self.ctx, node, setting) {
                tracing::warn!("strobe: cannot flip the clock of {node}: {e:#}");
            }
        }
    }

    fn nodes(&self) -> Vec<String> {
        self.ctx.observations.nodes().to_vec()
    }

    fn is_running(&self, node: &str) -> bool {
        self.ctx.target.is_running(node)
    }

    fn resolve_now(&self, spec: &TargetSpec, pick: u64) -> Vec<String> {
        inject::resolve_now(self.ctx, spec, pick)
    }

    fn observations<R>(&self, read: impl FnOnce(&Observations) -> R) -> R {
        read(&self.ctx.observations)
    }

    fn situations_met(&self) -> BTreeSet<Situation> {
        self.ctx.recorder.situations_met()
    }

    fn situations_mark(&self) -> usize {
        self.ctx.recorder.situations_mark()
    }

    fn met_since(&self, mark: usize) -> Vec<Situation> {
        self.ctx.recorder.met_since(mark)
    }

    fn phase_now(&self) -> Phase {
        self.ctx.recorder.phase_now()
    }

    fn settled_since(&self, since: Duration) -> bool {
        let since_ns = self.history_start + since.as_nanos() as u64;
        (self.ctx.recorder).view(|v| v.settled(since_ns).is_settled())
    }
}

/// Sleeps until `until`; true if the stop signal came first (or was already given).
pub(crate) async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, until: Instant) -> bool {
    if *stop.borrow() {
        return true;
    }
    let stopped = tokio::select! {
        _ = tokio::time::sleep_until(until) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    stopped || *stop.borrow()
}
