//! Runs the cells of a sweep: up to `parallel` child runs at once, none started once the next
//! would not fit the wall-clock budget, a signal passed on to every run in flight.
//!
//! The budget is judged per run: a run is expected to take its time limit plus the overhead
//! measured on the runs finished so far (cluster start, final heal and recovery, checkers,
//! report), `FIRST_OVERHEAD` before any has finished.

use super::keep::{self, Keep};
use super::matrix::{Cell, Matrix};
use super::progress::Progress;
use super::record::{outcome, RunRecord};
use crate::commands::run::child::{run_child, ChildCommand, ChildPlace, ChildRun, Stop};
use crate::commands::run::interrupt::{Interrupts, Signal};
use crate::exit;
use crate::history::situation::Situation;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The overhead of a run beyond its time limit, before one has been measured.
pub const FIRST_OVERHEAD: Duration = Duration::from_secs(20);
/// A child is stopped when it takes this much longer than its time limit plus recovery
/// timeout (a hung run must not eat the whole night).
const DEADLINE_MARGIN: Duration = Duration::from_secs(300);
/// A simulated batch is stopped after this long (a thousand runs take about half a minute).
const SIM_DEADLINE: Duration = Duration::from_secs(3600);

/// How a sweep runs its cells.
pub struct Runner {
    /// The fle-chaos executable the children run.
    pub exe: PathBuf,
    /// The sweep folder: runs go to `runs/`, each child's stderr to `logs/ID.log`.
    pub dir: PathBuf,
    pub parallel: usize,
    pub budget: Option<Duration>,
    /// `fle-chaos test` flags given to every run (`--node-binary`, `--net`).
    pub pass_through: Vec<String>,
    pub matrix: Matrix,
    /// Which finished runs keep their whole folder.
    pub keep: Keep,
    /// `--shrink`: an invalid run keeps its history, which the shrink replays.
    pub shrink: bool,
    /// Situations met before this night's next run (`carried`): earlier nights' and the
    /// runs finished so far, handed to each run as it starts (`--met-before`).
    pub met_before: BTreeSet<Situation>,
}

/// What running the cells gave.
pub struct Ran {
    pub runs: Vec<RunRecord>,
    /// Not started: the budget ran out (or a signal came).
    pub skipped: Vec<Cell>,
    pub interrupted: Option<Signal>,
}

/// Expected duration of a run, from the runs measured so far.
pub struct Estimate {
    time_limit: Duration,
    overheads: Vec<Duration>,
}

impl Estimate {
    pub fn new(time_limit: Duration) -> Estimate {
        Estimate {
            time_limit,
            overheads: Vec::new(),
        }
    }

    pub fn measured(&mut self, took: Duration) {
        self.overheads.push(took.saturating_sub(self.time_limit));
    }

    /// The time limit plus the mean measured overhead (`FIRST_OVERHEAD` before any).
    pub fn run(&self) -> Duration {
        let overhead = if self.overheads.is_empty() {
            FIRST_OVERHEAD
        } else {
            self.overheads.iter().sum::<Duration>() / self.overheads.len() as u32
        };
        self.time_limit + overhead
    }

    /// Wall time for `queued` more runs with `parallel` at once, `running` already in flight.
    pub fn left(&self, queued: usize, running: usize, parallel: usize) -> Duration {
        let waves = (queued + running).div_ceil(parallel.max(1));
        self.run() * waves as u32
    }

    /// Whether a run started `elapsed` into a sweep of `budget` ends within it.
    pub fn fits(&self, elapsed: Duration, budget: Option<Duration>) -> bool {
        budget.is_none_or(|b| elapsed + self.run() <= b)
    }
}

impl Runner {
    pub fn runs_dir(&self) -> PathBuf {
        self.dir.join("runs")
    }

    /// Runs `cells` in order; returns every finished run, in the order they finished, and
    /// hands each to `finished` as it comes (the sweep keeps its record on disk current).
    pub async fn run(
        &self,
        cells: Vec<Cell>,
        interrupts: &Interrupts,
        finished: &mut dyn FnMut(&RunRecord),
    ) -> Ran {
        let start = Instant::now();
        let mut estimate = Estimate::new(self.matrix.time_limit);
        let mut progress = Progress::new(cells.len());
        let mut queue: std::collections::VecDeque<Cell> = cells.into();
        let mut running: JoinSet<(Cell, chrono::DateTime<chrono::Utc>, ChildRun)> = JoinSet::new();
        let mut runs = Vec::new();
        let mut out_of_budget = false;
        let mut interrupted = None;
        let mut met_before = self.met_before.clone();
        loop {
            while running.len() < self.parallel && !out_of_budget && interrupted.is_none() {
                let Some(cell) = queue.front() else { break };
                if let Some(sig) = interrupts.received() {
                    interrupted = Some(sig);
                    break;
                }
                if !estimate.fits(start.elapsed(), self.budget) {
                    out_of_budget = true;
                    progress.say(&format!(
                        "budget: {} left, a run takes about {}: {} runs not started",
                        crate::duration::span(
                            self.budget
                                .unwrap_or_default()
                                .saturating_sub(start.elapsed())
                                .as_secs_f64()
                        ),
                        crate::duration::span(estimate.run().as_secs_f64()),
                        queue.len()
                    ));
                    break;
                }
                let cell = cell.clone();
                queue.pop_front();
                running.spawn(self.start(cell.clone(), interrupts.clone(), &met_before));
                progress.started(
                    &cell.id,
                    running.len(),
                    Some(self.left(&estimate, &queue, running.len(), start)),
                );
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            // Every run finished by now, not only the first: the next one started is handed
            // what they all met (two runs ending together left one out, 2026-12-05).
            let mut done = vec![joined];
            while let Some(more) = running.try_join_next() {
                done.push(more);
            }
            for joined in done {
                // A panic in the task (not in the child): the sweep's own failure, said per run.
                let Ok((cell, started_at, child)) = joined else {
                    progress.say("a run's task panicked; its result is lost");
                    continue;
                };
                if let Some(sig) = child.interrupted {
                    interrupted = interrupted.or(Some(sig));
                } else {
                    estimate.measured(child.duration);
                }
                let mut record = self.record(cell, started_at, child);
                met_before.extend(record.situations.iter().cloned());
                let shrinks =
                    self.shrink && record.verdict == Some(crate::checker::Validity::False);
                if self.keep.trims(&record) && !shrinks {
                    let folder = self
                        .dir
                        .join(record.run_dir.as_deref().unwrap_or(Path::new("")));
                    match keep::trim(&folder) {
                        Ok(()) => record.trimmed = true,
                        Err(e) => progress.say(&format!("{}: {e:#}", record.cell.id)),
                    }
                }
                finished(&record);
                progress.finished(
                    &record,
                    running.len(),
                    Some(self.left(&estimate, &queue, running.len(), start)),
                );
                runs.push(record);
            }
        }
        progress.finish();
        Ran {
            runs,
            skipped: queue.into(),
            interrupted,
        }
    }

    fn left(
        &self,
        e: &Estimate,
        queue: &std::collections::VecDeque<Cell>,
        running: usize,
        start: Instant,
    ) -> Duration {
        let left = e.left(queue.len(), running, self.parallel);
        match self.budget {
            Some(b) => left.min(b.saturating_sub(start.elapsed())),
            None => left,
        }
    }

    /// The future of one child run.
    fn start(
        &self,
        cell: Cell,
        interrupts: Interrupts,
        met_before: &BTreeSet<Situation>,
    ) -> impl std::future::Future<Output = (Cell, chrono::DateTime<chrono::Utc>, ChildRun)>
           + Send
           + 'static {
        let mut args = cell.args(&self.matrix);
        // The pass-through flags and the steering are `test`'s: a simulated batch has neither.
        if !cell.is_sim() {
            args.extend(self.pass_through.iter().cloned());
        }
        // Started as it is handed what was met so far (its task may first run a little later).
        let started_at = chrono::Utc::now();
        // Nothing met yet, or the hand-over failed (said): the run steers on its own.
        if !met_before.is_empty() && !cell.is_sim() {
            match super::carried::hand_over(&self.dir, &cell.id, met_before) {
                Ok(file) => args.extend(["--met-before".into(), file.display().to_string()]),
                Err(e) => eprintln!("fle-chaos sweep: {}: {e:#}", cell.id),
            }
        }
        let exe = self.exe.clone();
        let out = self.runs_dir();
        let log = self.dir.join("logs").join(format!("{}.log", cell.id));
        let recovery = self
            .matrix
            .recovery_timeout
            .unwrap_or(Duration::from_secs(30));
        let deadline = if cell.is_sim() {
            SIM_DEADLINE
        } else {
            self.matrix.time_limit + recovery + DEADLINE_MARGIN
        };
        let command = if cell.is_sim() {
            ChildCommand::Simulate
        } else {
            ChildCommand::Test
        };
        async move {
            let place = ChildPlace {
                out: &out,
                name: &cell.id,
                log: &log,
                command,
            };
            let stop = async { Stop::Interrupted(interrupts.wait().await) };
            let child = match run_child(&exe, &args, place, Some(deadline), stop).await {
                Ok(c) => c,
                Err(e) => ChildRun {
                    code: exit::CRASHED,
                    run_dir: None,
                    results: None,
                    duration: Duration::ZERO,
                    note: Some(format!("{e:#}")),
                    interrupted: None,
                    cancelled: false,
                },
            };
            (cell, started_at, child)
        }
    }

    /// The record of a finished child run (paths relative to the sweep folder).
    fn record(
        &self,
        cell: Cell,
        started_at: chrono::DateTime<chrono::Utc>,
        child: ChildRun,
    ) -> RunRecord {
        let rel = |p: &Path| {
            p.strip_prefix(&self.dir)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| p.to_path_buf())
        };
        let sim_dir = child.run_dir.clone().filter(|_| cell.is_sim());
        let mut r = RunRecord {
            outcome: outcome(&cell, child.code, false),
            code: child.code,
            verdict: child.results.as_ref().map(|r| r.valid),
            run_dir: child.run_dir.as_deref().map(rel),
            log: PathBuf::from("logs").join(format!("{}.log", cell.id)),
            started_at,
            ended_at: Some(chrono::Utc::now()),
            duration_s: child.duration.as_secs_f64(),
            recovery_ms: Vec::new(),
            rejoin_ms: Vec::new(),
            unrecovered: 0,
            situations: Vec::new(),
            failed_checkers: Vec::new(),
            known: Vec::new(),
            note: child.note,
            minimal: None,
            trimmed: false,
            interrupted: child.interrupted.is_some(),
            cell,
        };
        if let Some(results) = &child.results {
            r.failed_checkers = results
                .checkers
                .iter()
                .filter(|c| c.valid == crate::checker::Validity::False)
                .map(|c| c.name.clone())
                .collect();
            r.known = results.known.iter().map(|k| k.id.clone()).collect();
            let known_passes = !r.known.is_empty() && !self.matrix.fail_on_known;
            r.outcome = outcome(&r.cell, r.code, known_passes);
            if let Some(c) = &results.coverage {
                r.situations = c.met.iter().map(|m| m.situation.clone()).collect();
            }
            if let Some(m) = results.checkers.iter().find_map(|c| c.recovery()) {
                for f in &m.faults {
                    match f.ms_to_quorum_leader {
                        Some(ms) => r.recovery_ms.push(ms),
                        None => r.unrecovered += 1,
                    }
                    r.rejoin_ms.extend(f.ms_to_all_rejoined);
                }
            }
        } else if let Some(sim) = sim_dir.as_deref().and_then(sim_summary) {
            record_sim(&mut r, sim);
        } else if r.note.is_none() && !exit::is_interrupted(r.code) {
            r.note = Some(format!(
                "no results.json (exit {}): see {}",
                r.code,
                r.log.display()
            ));
        }
        r
    }
}

/// A simulated batch's record: the worst verdict, the checkers any run failed, the counts.
fn record_sim(r: &mut RunRecord, sim: crate::commands::sim::summary::SimSummary) {
    // From the counts: a batch that ran nothing tested nothing, so it is not valid.
    r.verdict = Some(if sim.invalid > 0 {
        crate::checker::Validity::False
    } else if sim.unknown > 0 || sim.runs == 0 {
        crate::checker::Validity::Unknown
    } else {
        crate::checker::Validity::True
    });
    let failed: BTreeSet<&String> = sim
        .results
        .iter()
        .filter(|run| run.valid == crate::checker::Validity::False)
        .flat_map(|run| run.failed.iter())
        .collect();
    r.failed_checkers = failed.into_iter().cloned().collect();
    r.note = Some(format!(
        "{} simulated runs (seeds {}-{}): {} invalid, {} unknown",
        sim.runs,
        r.cell.seed,
        r.cell.seed + sim.runs.saturating_sub(1) as u64,
        sim.invalid,
        sim.unknown
    ));
}

/// The summary of a simulated batch's folder (`summary.json`), when it has one.
fn sim_summary(dir: &Path) -> Option<crate::commands::sim::summary::SimSummary> {
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_learns_the_overhead_and_judges_the_budget() {
        let mut e = Estimate::new(Duration::from_secs(10));
        assert_eq!(e.run(), Duration::from_secs(30));
        e.measured(Duration::from_secs(14));
        e.measured(Duration::from_secs(18));
        assert_eq!(e.run(), Duration::from_secs(16));
        let budget = Some(Duration::from_secs(60));
        assert!(e.fits(Duration::from_secs(44), budget));
        assert!(!e.fits(Duration::from_secs(45), budget));
        assert!(e.fits(Duration::from_secs(1_000_000), None));
        // 5 more runs, 1 running, 2 at once: 3 waves.
        assert_eq!(e.left(5, 1, 2), Duration::from_secs(48));
    }
}
