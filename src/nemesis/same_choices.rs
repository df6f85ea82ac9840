//! The done-when of one nemesis loop for real and simulated runs: the same seed and the same
//! observed situations give the same choices whichever clock drives the loop. One scripted
//! cluster (five nodes that always run, n1 leading, no reads: triggers time out) answers the
//! loop's reads from what it applied so far; the loop runs it once under tokio's clock (as a
//! real run does, here paused so it runs in no time) and once under virtual time (as the
//! simulator does, `virtual_time::Parked`). The faults applied, in order, with their targets
//! and what aimed them (steered, goal, goal met or missed, trigger missed), must be the same.

use super::env::{NemesisEnv, Steering};
use super::runner::run_plan;
use super::schedule::{PlannedFault, Schedule, TargetSpec};
use super::steer::{self, Strategy};
use super::targets::{resolve, Ensemble, Resolved};
use super::virtual_time::{Alarm, Parked};
use crate::history::situation::{Phase, Situation, Who};
use crate::workload::observe::Observations;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// One applied fault as the test compares it.
#[derive(Debug, Clone, PartialEq)]
struct Choice {
    kind: &'static str,
    target: String,
    nodes: Vec<String>,
    /// What aimed it, less the annotations that measure a wait (they differ by the clocks'
    /// resolutions, not by a choice).
    aimed: serde_json::Map<String, serde_json::Value>,
    at_ms: u64,
}

/// The clock half of an environment: tokio's or virtual.
trait Clock {
    fn now(&self) -> Duration;
    fn sleep_until(&mut self, at: Duration) -> impl Future<Output = bool>;
    fn stopped(&mut self) -> impl Future<Output = ()>;
}

struct TokioClock {
    start: tokio::time::Instant,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    async fn sleep_until(&mut self, at: Duration) -> bool {
        super::live::sleep_or_stop(&mut self.stop, self.start + at).await
    }

    async fn stopped(&mut self) {
        let _ = self.stop.wait_for(|s| *s).await;
    }
}

struct VirtualClock(Rc<Alarm>);

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.now())
    }

    fn sleep_until(&mut self, at: Duration) -> impl Future<Output = bool> {
        self.0.sleep(Some(at.as_nanos() as u64))
    }

    async fn stopped(&mut self) {
        self.0.sleep(None).await;
    }
}

/// The scripted cluster. A fault meets, for each of its aims (`steer::aims`), the situation
/// of its kind and whom it names, in the phase the applied count gives; the phase now cycles
/// once a second; the cluster settles 200 ms after a fault.
struct Scripted<C> {
    clock: C,
    nodes: Vec<String>,
    observations: Observations,
    met: Vec<Situation>,
    applied: Rc<RefCell<Vec<Choice>>>,
}

impl<C: Clock> Scripted<C> {
    fn new(clock: C, applied: Rc<RefCell<Vec<Choice>>>) -> Self {
        let nodes: Vec<String> = (1..=5).map(|i| format!("n{i}")).collect();
        Scripted {
            clock,
            observations: Observations::new(nodes.clone()),
            nodes,
            met: Vec::new(),
            applied,
        }
    }

    fn resolved(&self, spec: &TargetSpec, pick: u64) -> Resolved {
        let ens = Ensemble {
            nodes: &self.nodes,
            observers: &[],
        };
        resolve(spec, ens, Some("n1"), pick)
    }
}

impl<C: Clock> NemesisEnv for Scripted<C> {
    type Applied = Vec<String>;

    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn sleep_until(&mut self, at: Duration) -> impl Future<Output = bool> {
        self.clock.sleep_until(at)
    }

    fn stopped(&mut self) -> impl Future<Output = ()> {
        self.clock.stopped()
    }

    fn apply(&mut self, fault: &PlannedFault) -> Option<Vec<String>> {
        let t = &fault.template;
        let nodes = self.resolved(&t.target, fault.pick).nodes;
        let phase = Phase::ALL[self.met.len() % Phase::ALL.len()];
        for (kind, who) in steer::aims(fault) {
            let who = who.unwrap_or(Who::Follower);
            let with = Vec::new();
            self.met.push(Situation {
                kind,
                who,
                phase,
                with,
            });
        }
        let mut aimed = fault.annotations.clone();
        for measured in ["gap_ms", "gap_unsettled_ms", "goal_wait_ms"] {
            aimed.remove(measured);
        }
        self.applied.borrow_mut().push(Choice {
            kind: t.kind.name(),
            target: t.target.describe(),
            nodes: nodes.clone(),
            aimed,
            at_ms: fault.start.as_millis() as u64,
        });
        Some(nodes)
    }

    fn undo(&mut self, _: Vec<String>) {}

    fn hit(applied: &Vec<String>) -> Vec<String> {
        applied.clone()
    }

    fn strobe(&self, _: &Vec<String>) -> Option<(i64, Duration)> {
        None
    }

    fn flip(&mut self, _: &Vec<String>, _: i64) {}

    fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }

    fn is_running(&self, _: &str) -> bool {
        true
    }

    fn resolve_now(&self, spec: &TargetSpec, pick: u64) -> Vec<String> {
        self.resolved(spec, pick).nodes
    }

    fn observations<R>(&self, read: impl FnOnce(&Observations) -> R) -> R {
        read(&self.observations)
    }

    fn situations_met(&self) -> BTreeSet<Situation> {
        self.met.iter().cloned().collect()
    }

    fn situations_mark(&self) -> usize {
        self.met.len()
    }

    fn met_since(&self, mark: usize) -> Vec<Situation> {
        self.met[mark..].to_vec()
    }

    fn phase_now(&self) -> Phase {
        Phase::ALL[self.now().as_secs() as usize % Phase::ALL.len()]
    }

    fn settled_since(&self, since: Duration) -> bool {
        self.now() >= since + Duration::from_millis(200)
    }
}

const TIME_LIMIT: Duration = Duration::from_secs(120);

fn mixed() -> Schedule {
    let file = std::path::Path::new("mixed");
    let all = super::Abilities::all();
    (super::schedule_from_flags(None, Some(file), None, &all).unwrap()).schedule
}

fn steering() -> Steering {
    Steering {
        strategy: Strategy::Steered,
        met_before: BTreeSet::new(),
        writes: true,
    }
}

/// The loop under tokio's (paused) clock, stopped at the time limit.
fn under_tokio(schedule: &Schedule, seed: u64) -> Vec<Choice> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let applied = Rc::new(RefCell::new(Vec::new()));
    rt.block_on(async {
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let start = tokio::time::Instant::now();
        let mut env = Scripted::new(TokioClock { start, stop }, Rc::clone(&applied));
        tokio::spawn(async move {
            tokio::time::sleep(TIME_LIMIT).await;
            let _ = stop_tx.send(true);
        });
        run_plan(&mut env, schedule, seed, TIME_LIMIT, &steering()).await;
    });
    applied.take()
}

/// The loop under virtual time, stepped whenever it asks, stopped at the time limit.
fn under_virtual_time(schedule: &Schedule, seed: u64, steering: Steering) -> Vec<Choice> {
    let alarm = Alarm::new();
    let applied = Rc::new(RefCell::new(Vec::new()));
    let mut env = Scripted::new(VirtualClock(Rc::clone(&alarm)), Rc::clone(&applied));
    let schedule = schedule.clone();
    let mut parked = Parked::new(alarm, async move {
        run_plan(&mut env, &schedule, seed, TIME_LIMIT, &steering).await
    });
    let limit = TIME_LIMIT.as_nanos() as u64;
    let mut now = 0;
    while let Some(next) = parked.step(now).filter(|t| *t < limit) {
        now = next;
    }
    parked.stop(limit);
    applied.take()
}

#[test]
fn same_seed_same_situations_same_choices_under_tokio_and_virtual_time() {
    let schedule = mixed();
    for seed in [1, 2, 3] {
        let real = under_tokio(&schedule, seed);
        let simulated = under_virtual_time(&schedule, seed, steering());
        assert!(
            real.len() >= 8,
            "seed {seed}: {} faults in 120 s",
            real.len()
        );
        assert!(
            real.iter().any(|c| c.aimed.contains_key("steered")),
            "seed {seed}: steering moved nothing: {real:#?}"
        );
        assert!(
            real.iter().any(|c| c.aimed.contains_key("goal")),
            "seed {seed}: no fault dealt for its goal: {real:#?}"
        );
        assert_eq!(real.len(), simulated.len(), "seed {seed}");
        for (i, (r, s)) in real.iter().zip(&simulated).enumerate() {
            // The same moment within the clocks' resolutions (tokio's timer rounds each
            // sleep up to a millisecond).
            let drift = r.at_ms.abs_diff(s.at_ms);
            assert!(drift <= 100, "seed {seed}, fault {i}: at {r:?} vs {s:?}");
            let (r, s) = (
                Choice {
                    at_ms: 0,
                    ..r.clone()
                },
                Choice {
                    at_ms: 0,
                    ..s.clone()
                },
            );
            assert_eq!(r, s, "seed {seed}, fault {i}");
        }
    }
}

#[test]
fn the_virtual_loop_is_repeatable_and_another_strategy_chooses_otherwise() {
    let schedule = mixed();
    let a = under_virtual_time(&schedule, 7, steering());
    assert_eq!(a, under_virtual_time(&schedule, 7, steering()));
    let random = Steering {
        strategy: Strategy::Random,
        ..steering()
    };
    let random = under_virtual_time(&schedule, 7, random);
    assert!(random.iter().all(|c| !c.aimed.contains_key("steered")));
    let kinds = |cs: &[Choice]| {
        cs.iter()
            .map(|c| (c.kind, c.target.clone()))
            .collect::<Vec<_>>()
    };
    assert_ne!(
        kinds(&a),
        kinds(&random),
        "steering chose as the seeded order does"
    );
}
