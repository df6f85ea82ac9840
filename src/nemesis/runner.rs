//! The scheduled nemesis: walks the seeded plan, applying each fault at its time and undoing it
//! after its duration, until the run's time is up; then the final heal undoes everything and
//! verifies it.

use super::inject::{self, Active};
use super::plan::{fault_window, plan, PlannedFault};
use super::schedule::Schedule;
use super::seam::{Nemesis, NemesisContext};
use crate::control::clock::ClockSetting;
use crate::control::iptables::CHAIN;
use crate::control::target::BoxFuture;
use crate::history::{EventType, F, NEMESIS};
use anyhow::Result;
use serde_json::json;
use std::sync::Mutex;

use tokio::time::Instant;

/// A nemesis driven by a `Schedule` and the run's seed.
pub struct ScheduledNemesis {
    pub schedule: Schedule,
    /// The fault in force, so that the final heal undoes it even if `run` was cut short.
    active: Mutex<Option<Active>>,
}

impl ScheduledNemesis {
    pub fn new(schedule: Schedule) -> Self {
        ScheduledNemesis {
            schedule,
            active: Mutex::new(None),
        }
    }

    async fn run_plan(&self, ctx: &NemesisContext) -> Result<()> {
        let mut stop = ctx.stop.clone();
        let start = Instant::now();
        for fault in plan(&self.schedule, ctx.seed, fault_window(ctx.time_limit)) {
            if sleep_or_stop(&mut stop, start + fault.start).await {
                break;
            }
            let Some(active) = inject::apply(ctx, &fault) else {
                continue;
            };
            *self.active.lock().unwrap() = Some(active.clone());
            let stopped = self.hold(ctx, &mut stop, &fault, &active).await;
            inject::undo(ctx, &active);
            *self.active.lock().unwrap() = None;
            if stopped {
                break;
            }
        }
        let _ = stop.wait_for(|s| *s).await;
        Ok(())
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
        let Active::Skewed {
            nodes,
            strobe: Some((delta_ms, period)),
        } = active
        else {
            return sleep_or_stop(stop, end).await;
        };
        let mut skewed = true;
        loop {
            let next = (Instant::now() + *period).min(end);
            if sleep_or_stop(stop, next).await {
                return true;
            }
            if next >= end {
                return false;
            }
            skewed = !skewed;
            let setting = ClockSetting::Offset(if skewed { *delta_ms } else { 0 });
            for node in nodes {
                // One flip is one step per node (over SSH a round trip each); a failed flip is
                // put right by the reset at the end.
                if let Err(e) = inject::set_clock(ctx, node, setting) {
                    tracing::warn!("strobe: cannot flip the clock of {node}: {e:#}");
                }
            }
        }
    }

    /// Undoes every fault, whatever the record says, then checks that nothing is left.
    fn heal_everything(&self, ctx: &NemesisContext) -> Result<()> {
        if let Some(active) = self.active.lock().unwrap().take() {
            inject::undo(ctx, &active);
        }
        let nodes = ctx.observations.nodes().to_vec();
        let kinds = self.schedule.kinds();
        use super::schedule::FaultKind;
        if kinds.contains(&FaultKind::Kill)
            || kinds.contains(&FaultKind::Pause)
            || kinds.contains(&FaultKind::PowerLoss)
            || kinds.contains(&FaultKind::Corrupt)
        {
            for node in &nodes {
                if !ctx.target.is_running(node) {
                    inject::undo(
                        ctx,
                        &Active::Killed {
                            nodes: vec![node.clone()],
                        },
                    );
                }
            }
        }
        if let Some(net) = ctx
            .control
            .net()
            .filter(|_| kinds.contains(&FaultKind::Partition))
        {
            inject::heal_partition(ctx, net, &nodes, true);
        }
        if let Some(net) = ctx
            .control
            .net()
            .filter(|_| kinds.contains(&FaultKind::Packet))
        {
            inject::heal_packets(ctx, net, &nodes, Vec::new(), true);
        }
        if kinds.contains(&FaultKind::Clock) {
            inject::reset_clocks(ctx, &nodes, true);
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
                match crate::control::packet::leftovers(ctx.control.as_ref(), node, in_netns) {
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
