//! The seam where the nemesis plugs into a run.
//!
//! A nemesis is started with the run and gets a `NemesisContext`: the `Target` (kill, start,
//! pause, resume, and its `clock()` for clock faults), the `Control` (process state, addresses,
//! and `net()` for partitions, whose rules are recorded before they exist so teardown and
//! `clean` remove them), the history recorder, the latest observations (to aim at "the
//! leader"), the seed, the settings from the CLI, and a stop signal. `run` returns when `stop` turns true; then the
//! controller calls `final_heal` once, which must undo every fault (restart killed nodes,
//! resume paused ones, remove partitions, reset clocks) and record it with `"final": true`.
//!
//! `crate::nemesis::build` picks the implementation from the schedule.

use crate::control::sut::{BoxFuture, Target};
use crate::control::Control;
use crate::history::recorder::Recorder;
use crate::history::{EventType, FaultKind, F, NEMESIS};
use crate::workload::observe::Observations;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the user asked for (`--nemesis`, `--nemesis-interval`, `--nemesis-file`).
#[derive(Debug, Clone, Serialize)]
pub struct NemesisSettings {
    /// The kinds of fault the schedule holds; empty = no faults.
    pub kinds: Vec<FaultKind>,
    /// Mean time between faults.
    pub interval: Duration,
    /// A schedule file (nemesis/*.toml), when given; it takes precedence over `kinds`.
    pub file: Option<PathBuf>,
    /// What the default schedule left out because this run cannot do it, one line per kind
    /// naming why (`crate::nemesis::Chosen::left_out`); empty when nothing was.
    pub left_out: Vec<String>,
    /// How the loop orders its planned faults and what that order depends on
    /// (`--nemesis-strategy`, the workload's writes, `--met-before`): one struct for `test`
    /// and `simulate`, its fields written here as before.
    #[serde(flatten)]
    pub steering: super::env::Steering,
    /// The nodes that only observe (`--observers`): targets such as `minority` and the
    /// leader-minority partition count voters only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<String>,
}

/// Everything a nemesis may use.
#[derive(Clone)]
pub struct NemesisContext {
    pub target: Arc<dyn Target>,
    pub control: Arc<dyn Control>,
    pub recorder: Arc<Recorder>,
    pub observations: Arc<Observations>,
    pub seed: u64,
    pub settings: NemesisSettings,
    /// How long faults may run: the nemesis plans none that would outlast it.
    pub time_limit: Duration,
    /// Turns true when the run's time is up (or it is interrupted).
    pub stop: watch::Receiver<bool>,
}

/// A fault injector.
pub trait Nemesis: Send + Sync {
    /// Injects faults until `ctx.stop` turns true.
    fn run<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>>;
    /// Undoes every fault still in force. Called once, after `run` returned.
    fn final_heal<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>>;
}

/// The nemesis that does nothing (`--nemesis none`).
pub struct NoNemesis;

impl Nemesis for NoNemesis {
    fn run<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>> {
        let mut stop = ctx.stop.clone();
        Box::pin(async move {
            let _ = stop.wait_for(|s| *s).await;
            Ok(())
        })
    }

    /// Nothing to undo; the final heal is still recorded, since the checkers measure recovery
    /// from it.
    fn final_heal<'a>(&'a self, ctx: &'a NemesisContext) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let value = serde_json::json!({ "nodes": ctx.observations.nodes(), "final": true });
            ctx.recorder
                .record(NEMESIS, EventType::Invoke, F::Heal, None, value.clone());
            ctx.recorder
                .record(NEMESIS, EventType::Info, F::Heal, None, value);
            Ok(())
        })
    }
}
