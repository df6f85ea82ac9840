//! Replaying candidates: each candidate (a timed sequence and a run length) is replayed up to
//! k times as child runs, up to `parallel` at once. Failures are timing-dependent, so a
//! candidate *fails* (reproduces the failure) as soon as one of its replays does, and *passes*
//! only when all k did not. A batch stops at its first failing candidate: the children still
//! running are stopped (SIGTERM, they tear down) and awaited. No child starts after the
//! deadline (the budget), and an interrupt stops every child before returning.

use super::child::test_argv;
use crate::commands::run::child::{run_child, ChildCommand, ChildPlace, ChildRun, Stop};
use crate::commands::run::interrupt::{Interrupts, Signal};
use crate::commands::run::plan::TestArgs;
use crate::nemesis::plan::time_limit_for;
use crate::nemesis::schedule::PlannedFault;
use crate::nemesis::timed;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A fault sequence to replay and how long to run it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub steps: Vec<PlannedFault>,
    pub time_limit: Duration,
}

impl Candidate {
    /// A run just long enough for `steps` to be undone, then `tail` of quiet (the fault window
    /// leaves room at the end, see `plan::fault_window`); at least `floor`.
    pub fn fitted(steps: Vec<PlannedFault>, tail: Duration, floor: Duration) -> Candidate {
        let end = steps
            .iter()
            .map(|s| s.start + s.duration)
            .max()
            .unwrap_or_default();
        let need = time_limit_for(end).max(end + tail).max(floor);
        // Whole tenths of a second, rounded up, as the command line writes them.
        let tenths = need.as_millis().div_ceil(100) as u64;
        Candidate {
            steps,
            time_limit: Duration::from_millis(tenths * 100),
        }
    }

    /// When the last fault is undone.
    pub fn end(&self) -> Duration {
        self.steps
            .iter()
            .map(|s| s.start + s.duration)
            .max()
            .unwrap_or_default()
    }
}

/// One child run, as the report lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Replay {
    /// The candidate's number (its schedule is `candidates/cN.toml`).
    pub candidate: usize,
    pub faults: usize,
    pub time_limit_s: f64,
    pub code: i32,
    /// Every target checker judged it invalid.
    pub reproduced: bool,
    pub invalid: Vec<String>,
    pub run_dir: Option<PathBuf>,
    pub took_s: f64,
    /// Stopped by the shrinker (its batch was decided, the budget ran out, an interrupt).
    pub cancelled: bool,
}

/// Runs candidates as child `fle-chaos test` processes.
pub struct Engine {
    pub exe: PathBuf,
    pub args: TestArgs,
    pub dir: PathBuf,
    pub replays: u32,
    pub parallel: usize,
    /// The checkers that must all say invalid for a replay to reproduce the failure.
    pub target: Vec<String>,
    pub interrupts: Option<Interrupts>,
    /// A simulated failure: candidates run in-process by the simulator, not as children.
    pub sim: Option<std::sync::Arc<crate::commands::sim::replay::SimReplayer>>,
    pub fake_monotonic: bool,
    /// Every child run so far.
    pub runs: Vec<Replay>,
    pub candidates: usize,
    pub interrupted: Option<Signal>,
    /// A child was not started because the deadline had passed.
    pub budget_hit: bool,
    /// Candidates decided so far (by their schedule and run length): whether they failed.
    /// A set-aside candidate is recorded as passing.
    pub decided: std::collections::HashMap<String, bool>,
    /// The live line (or a plain line per replay).
    pub progress: super::progress::Progress,
}

/// What identifies a candidate: its steps as written and its run length.
fn key(c: &Candidate) -> String {
    format!(
        "{} {}",
        c.time_limit.as_millis(),
        timed::to_toml(&c.steps, "", false)
    )
}

impl Engine {
    /// Sets `c` aside: from now on it counts as passing (its reproduction rate was too low).
    pub fn set_aside(&mut self, c: &Candidate) {
        self.decided.insert(key(c), false);
    }

    fn reproduces(&self, run: &ChildRun) -> bool {
        let invalid = run.invalid_checkers();
        run.code == crate::exit::INVALID && self.target.iter().all(|t| invalid.contains(t))
    }

    /// Writes candidate `id`'s schedule; None for no faults (`--nemesis none`).
    fn write(&self, id: usize, c: &Candidate) -> Result<Option<PathBuf>> {
        if c.steps.is_empty() {
            return Ok(None);
        }
        let dir = self.dir.join("candidates");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("c{id}.toml"));
        let header = format!(
            "candidate {id} of the shrink in {}: {} faults, run {} s",
            self.dir.display(),
            c.steps.len(),
            c.time_limit.as_secs_f64()
        );
        std::fs::write(
            &path,
            timed::to_toml(&c.steps, &header, self.fake_monotonic),
        )?;
        Ok(Some(path))
    }

    /// Replays `cands`; returns the index of the first found to fail (stopping the rest), or
    /// None when every candidate passed its k replays (or could not be decided in time).
    pub async fn first_failing(
        &mut self,
        cands: &[Candidate],
        deadline: Instant,
    ) -> Result<Option<usize>> {
        let counts = self.replay(cands, self.replays, Some(0), deadline).await?;
        Ok(counts.iter().position(|(fails, _)| *fails > 0))
    }

    /// Replays `cands` up to k times each until one at index `stop_from` or later fails (the
    /// ones before it are decided too, but do not stop the batch); per candidate, whether it
    /// failed.
    pub async fn failing(
        &mut self,
        cands: &[Candidate],
        stop_from: usize,
        deadline: Instant,
    ) -> Result<Vec<bool>> {
        let counts = self
            .replay(cands, self.replays, Some(stop_from), deadline)
            .await?;
        Ok(counts.iter().map(|(fails, _)| *fails > 0).collect())
    }

    /// Replays `cand` `n` times (all of them); returns (reproduced, completed).
    pub async fn measure(
        &mut self,
        cand: &Candidate,
        n: u32,
        deadline: Instant,
    ) -> Result<(u32, u32)> {
        let counts = self
            .replay(std::slice::from_ref(cand), n, None, deadline)
            .await?;
        Ok(counts[0])
    }

    /// Replays each candidate up to `k` times; per candidate (reproduced, completed).
    /// `stop: Some(from)`: a candidate stops at its first reproduction, and the batch with it
    /// when its index is `from` or later; None: every replay runs.
    async fn replay(
        &mut self,
        cands: &[Candidate],
        k: u32,
        stop: Option<usize>,
        deadline: Instant,
    ) -> Result<Vec<(u32, u32)>> {
        let mut batch = Batch::written(self, cands)?;
        if let Some(known) = self.recall(&mut batch, k, stop) {
            return Ok(known);
        }
        // Every candidate's first replay before anyone's second: a batch is decided sooner.
        let mut queue: std::collections::VecDeque<(usize, u32)> = (0..k)
            .flat_map(|r| (0..cands.len()).map(move |c| (c, r)))
            .collect();
        let (cancel, cancelled) = watch::channel(false);
        let mut running: JoinSet<(usize, u32, Result<ChildRun>)> = JoinSet::new();
        let mut stopping = false;
        let interrupts = self.interrupts.clone();
        loop {
            while !stopping && running.len() < self.parallel.max(1) {
                let Some((c, r)) = queue.pop_front() else {
                    break;
                };
                if batch.known[c] || (stop.is_some() && batch.counts[c].0 > 0) {
                    continue;
                }
                if Instant::now() >= deadline {
                    self.budget_hit = true;
                    stopping = true;
                    break;
                }
                self.spawn(&mut running, &batch, c, r, cancelled.clone());
            }
            if running.is_empty() {
                break;
            }
            let interrupt = async {
                match &interrupts {
                    Some(i) => i.wait().await,
                    None => std::future::pending().await,
                }
            };
            let joined = tokio::select! {
                j = running.join_next() => j,
                sig = interrupt, if self.interrupted.is_none() => {
                    self.interrupted = Some(sig);
                    stopping = true;
                    let _ = cancel.send(true);
                    continue;
                }
            };
            let Some(joined) = joined else { break };
            let (c, _r, run) = joined?;
            let run = run?;
            if run.code == crate::exit::BAD_ARGS && !run.cancelled {
                let _ = cancel.send(true);
                while running.join_next().await.is_some() {}
                bail!(
                    "a replay refused its settings (exit 254): see {}",
                    self.dir.join("runs").display()
                );
            }
            let reproduced = self.record(&batch, c, &run, running.len());
            if !run.cancelled {
                batch.counts[c].1 += 1;
                if reproduced {
                    batch.counts[c].0 += 1;
                    if stop.is_some_and(|from| c >= from) {
                        stopping = true;
                        let _ = cancel.send(true);
                    }
                }
            }
        }
        if stop.is_some() && self.interrupted.is_none() {
            self.remember(&batch, k);
        }
        Ok(batch.counts)
    }

    /// With `stop`, candidates decided before are not replayed again (a search resumed after
    /// a candidate was set aside walks the same path up to it): their counts are filled in,
    /// and when one of them fails at `from` or later the batch is decided already.
    fn recall(&self, batch: &mut Batch, k: u32, stop: Option<usize>) -> Option<Vec<(u32, u32)>> {
        stop?;
        for (i, c) in batch.cands.iter().enumerate() {
            if let Some(&fails) = self.decided.get(&key(c)) {
                batch.known[i] = true;
                batch.counts[i] = if fails { (1, 1) } else { (0, k) };
                if fails && stop.is_some_and(|from| i >= from) {
                    return Some(batch.counts.clone());
                }
            }
        }
        None
    }

    /// Starts replay `r` of candidate `c` as a child run in `runs/cID-rR`, stopped (SIGTERM,
    /// never SIGKILL: it tears its cluster down, so nothing is left behind) once `cancelled`
    /// says so.
    fn spawn(
        &self,
        running: &mut JoinSet<(usize, u32, Result<ChildRun>)>,
        batch: &Batch,
        c: usize,
        r: u32,
        cancelled: watch::Receiver<bool>,
    ) {
        let out = self
            .dir
            .join("runs")
            .join(format!("c{}-r{}", batch.ids[c], r + 1));
        let (file, limit) = (batch.files[c].clone(), batch.cands[c].time_limit);
        match self.sim.clone() {
            Some(sim) => {
                running.spawn(async move {
                    let run = tokio::task::spawn_blocking(move || {
                        sim.replay(file.as_deref(), limit, &out)
                    })
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|run| run);
                    (c, r, run)
                });
            }
            None => {
                let argv = test_argv(&self.args, limit, file.as_deref());
                self.spawn_child(running, argv, out, (c, r), cancelled);
            }
        }
        self.progress
            .update(&self.runs, self.candidates, running.len(), false);
    }

    /// [`Self::spawn`]'s child `fle-chaos test ARGV` for replay `r` of candidate `c`.
    fn spawn_child(
        &self,
        running: &mut JoinSet<(usize, u32, Result<ChildRun>)>,
        argv: Vec<OsString>,
        out: PathBuf,
        (c, r): (usize, u32),
        mut cancelled: watch::Receiver<bool>,
    ) {
        let exe = self.exe.clone();
        running.spawn(async move {
            let run = async {
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
                let log = out.join("child.log");
                let place = ChildPlace {
                    out: &out,
                    name: "replay",
                    log: &log,
                    command: ChildCommand::Test,
                };
                let cancel = async move {
                    let _ = cancelled.wait_for(|c| *c).await;
                    Stop::Cancelled
                };
                run_child(&exe, &argv, place, None, cancel).await
            };
            (c, r, run.await)
        });
    }

    /// Lists a finished replay of candidate `c` for the report; whether it reproduced the
    /// failure (a cancelled replay never does).
    fn record(&mut self, batch: &Batch, c: usize, run: &ChildRun, still_running: usize) -> bool {
        let reproduced = !run.cancelled && self.reproduces(run);
        let cand = &batch.cands[c];
        self.runs.push(Replay {
            candidate: batch.ids[c],
            faults: cand.steps.len(),
            time_limit_s: cand.time_limit.as_secs_f64(),
            code: run.code,
            reproduced,
            invalid: run.invalid_checkers(),
            run_dir: run.run_dir.clone(),
            took_s: run.duration.as_secs_f64(),
            cancelled: run.cancelled,
        });
        self.progress
            .update(&self.runs, self.candidates, still_running, !run.cancelled);
        reproduced
    }

    /// Remembers the candidates this batch decided: failed, or passed all `k` replays.
    fn remember(&mut self, batch: &Batch, k: u32) {
        for (i, c) in batch.cands.iter().enumerate() {
            let (fails, done) = batch.counts[i];
            if !batch.known[i] && (fails > 0 || done >= k) {
                self.decided.insert(key(c), fails > 0);
            }
        }
    }
}

/// One batch of candidates being replayed: their numbers and schedule files, per candidate
/// (reproduced, completed) so far, and which were decided by an earlier batch.
struct Batch<'a> {
    cands: &'a [Candidate],
    ids: Vec<usize>,
    files: Vec<Option<PathBuf>>,
    counts: Vec<(u32, u32)>,
    known: Vec<bool>,
}

impl<'a> Batch<'a> {
    /// Numbers each candidate and writes its schedule.
    fn written(search: &mut Engine, cands: &'a [Candidate]) -> Result<Self> {
        let mut files = Vec::new();
        let mut ids = Vec::new();
        for c in cands {
            search.candidates += 1;
            ids.push(search.candidates);
            files.push(search.write(search.candidates, c)?);
        }
        Ok(Batch {
            cands,
            ids,
            files,
            counts: vec![(0, 0); cands.len()],
            known: vec![false; cands.len()],
        })
    }
}

/// A replay folder's path relative to `base`, for the report.
pub fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}
