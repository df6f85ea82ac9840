//! What the nemesis loop (`super::runner`) acts on and reads. Two environments implement it: a
//! real cluster (`super::live`: tokio's clock, processes, iptables) and the simulated world
//! (`commands::sim::nemesis`: virtual time). Every choice (the plan, steering, goals, triggers,
//! compositions, holds) is made once, in `runner`, from what an environment shows; an
//! environment only tells the time, sleeps, applies and undoes one fault and answers the reads
//! the choices need. So a simulated run is steered by the code that steers a real one.

use super::schedule::{PlannedFault, TargetSpec};
use super::steer::Strategy;
use crate::history::situation::{Phase, Situation};
use crate::history::EventType;
use crate::workload::observe::Observations;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

/// A cluster the nemesis loop acts on. Times are since the nemesis started.
pub trait NemesisEnv {
    /// What an applied fault leaves behind for its undo.
    type Applied;

    /// Time since the nemesis started.
    fn now(&self) -> Duration;
    /// Sleeps until `at`; true if the run stopped first (or had stopped already).
    fn sleep_until(&mut self, at: Duration) -> impl Future<Output = bool>;
    /// Waits until the run stops.
    fn stopped(&mut self) -> impl Future<Output = ()>;

    /// Applies `fault` (its kind's file, `super::faults`) and records it; None when nothing was
    /// done (recorded as a `fail`).
    fn apply(&mut self, fault: &PlannedFault) -> Option<Self::Applied>;
    /// Undoes an applied fault and records it.
    fn undo(&mut self, applied: Self::Applied);
    /// The nodes an applied fault hit.
    fn hit(applied: &Self::Applied) -> Vec<String>;
    /// A strobed clock the loop must flip while it holds (offset, period): a real cluster's.
    /// A simulated clock strobes by itself, from virtual time.
    fn strobe(&self, applied: &Self::Applied) -> Option<(i64, Duration)>;
    /// Sets the clocks of a strobed fault's nodes to `offset_ms`.
    fn flip(&mut self, applied: &Self::Applied, offset_ms: i64);

    /// The run's nodes.
    fn nodes(&self) -> Vec<String>;
    /// Whether `node`'s process runs (a killed one does not).
    fn is_running(&self, node: &str) -> bool;
    /// `spec`'s nodes now, resolved as a fault's target is (a trigger's `watch`).
    fn resolve_now(&self, spec: &TargetSpec, pick: u64) -> Vec<String>;
    /// Runs `read` on the observers' latest reads (what triggers fire on).
    fn observations<R>(&self, read: impl FnOnce(&Observations) -> R) -> R;

    /// The situations the run's faults met so far (`history::situation`).
    fn situations_met(&self) -> BTreeSet<Situation>;
    /// How many fault starts were classified so far: a mark for [`Self::met_since`].
    fn situations_mark(&self) -> usize;
    /// The situations of the fault starts recorded after `mark`, in order.
    fn met_since(&self, mark: usize) -> Vec<Situation>;
    /// The protocol's phase now, as a fault landing now would meet it.
    fn phase_now(&self) -> Phase;
    /// Whether the cluster settled (`View::settled`) on reads taken since `since`.
    fn settled_since(&self, since: Duration) -> bool;
}

/// What the loop's order of faults depends on beside the seed and what the run shows: one
/// struct for `test` and `simulate` (`NemesisSettings` holds it for a real run, and test.json
/// records it there).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Steering {
    /// Steered toward what the run has not met, or the seeded plan's order.
    pub strategy: Strategy,
    /// Situations met before this run (`--met-before`; a sweep's earlier runs and nights):
    /// steering prefers what neither they nor the run met. Recorded, so test.json says what
    /// the choices depended on.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub met_before: BTreeSet<Situation>,
    /// Whether the workload writes: goals after an ACK need client writes (`super::goal`).
    /// test.json names the workload already.
    #[serde(skip)]
    pub writes: bool,
}

/// The final heal's verify, as both environments record it (`F::Heal` by the nemesis): its
/// invoke, then `info` when nothing of the faults is left, or `fail` naming each `problem`
/// (a process still stopped, a link still cut, ...). The checkers read it as the run's final
/// heal whatever the kinds were.
pub fn verify_records(nodes: &[String], problems: Vec<String>) -> [(EventType, Value); 2] {
    let outcome = match problems.is_empty() {
        true => EventType::Info,
        false => EventType::Fail,
    };
    [
        (
            EventType::Invoke,
            json!({ "nodes": nodes, "final": true, "verify": true }),
        ),
        (
            outcome,
            json!({ "nodes": nodes, "final": true, "verify": true, "problems": problems }),
        ),
    ]
}
