//! `fle-chaos shrink RUN_DIR`: the smallest fault sequence that still makes a failing run fail.
//!
//! 1. The run's faults, as it did them (`nemesis::timed::of_run`: the history's fault
//!    intervals, resolved nodes, times since the workload started), are written as a timed
//!    schedule (`replay.toml`) and replayed: the failure must reproduce at all.
//! 2. Delta debugging (`ddmin`) removes faults: the empty sequence first (some failures need
//!    no fault), then chunks and complements of the sequence.
//! 3. The run is shortened: the quiet tail after the last fault, the quiet before and between
//!    faults, and the faults' durations, each halved while the failure still reproduces.
//! 4. The minimal sequence is replayed `--final-replays` times: its reproduction rate.
//!
//! "Reproduces" means every target checker (by default each one the original run judged
//! invalid; `--checker` narrows it) judges the replay invalid, so the search cannot slip to a
//! different failure. Each candidate is replayed up to k times (`search`): failures are
//! timing-dependent. Replays are child `fle-chaos test` runs (`child`). Everything goes to
//! RUN_DIR/shrink/: `replay.toml`, `minimal.toml`, `report.md`, `shrink.json`, the
//! candidates' schedules and every replay's run folder.
//!
//! A sweep calls [`shrink_run`] with its own budget.

pub mod child;
pub mod ddmin;
pub mod progress;
pub mod report;
pub mod search;

use crate::commands::run::interrupt::Interrupts;
use crate::commands::run::plan::TestArgs;
use crate::exit::{self, bad_input};
use crate::nemesis::schedule::PlannedFault;
use crate::nemesis::timed;
use crate::nemesis::units::parse_duration;
use crate::store::RunDir;
use anyhow::{Context, Result};
use clap::Args;
use search::{Candidate, Engine};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `fle-chaos shrink` options.
#[derive(Args, Debug, Clone)]
pub struct ShrinkArgs {
    /// The failing run's folder (OUT/NAME/TIMESTAMP, or OUT/latest).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Replays per candidate: a candidate still fails if any of its replays does.
    #[arg(long, default_value_t = 3, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub replays: u32,
    /// Replays of the minimal sequence that measure its reproduction rate.
    #[arg(long, default_value_t = 6, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub final_replays: u32,
    /// Replays run at once (each a cluster of its own, on its own subnet).
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub parallel: u32,
    /// Wall-clock budget ("45m", "90s"): no replay starts after it; the search stops at
    /// three quarters of it, leaving the rest for the final replays.
    #[arg(long, default_value = "2h", value_name = "DURATION")]
    pub budget: String,
    /// The checkers whose failure must reproduce, comma-separated [default: every checker
    /// the run judged invalid].
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub checker: Option<String>,
    /// Where to write the shrink [default: RUN_DIR/shrink].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only write the run's faults as a timed schedule (replay.toml) and its replay command;
    /// replay nothing.
    #[arg(long)]
    pub schedule_only: bool,
    /// The least share of final replays the minimal sequence must reproduce in; one below it
    /// (accepted on a lucky replay) is set aside and the search goes on without it.
    #[arg(long, default_value_t = 0.5, value_name = "RATE")]
    pub min_rate: f64,
}

/// What [`shrink_run`] does (a sweep builds this itself).
#[derive(Clone)]
pub struct ShrinkOptions {
    pub replays: u32,
    pub final_replays: u32,
    pub parallel: usize,
    pub budget: Duration,
    /// None: every checker the run judged invalid.
    pub checkers: Option<Vec<String>>,
    /// None: RUN_DIR/shrink.
    pub out: Option<PathBuf>,
    pub schedule_only: bool,
    /// The least reproduction rate a minimal sequence must show in its final replays.
    pub min_rate: f64,
    /// The `fle-chaos` executable the replays run.
    pub exe: PathBuf,
    /// The command's interrupts (installed once per process); None: not interruptible.
    pub interrupts: Option<Interrupts>,
}

impl ShrinkOptions {
    /// Defaults for a run of this executable: 3 replays, 6 final, one at a time, 2 h.
    pub fn new(exe: PathBuf) -> Self {
        ShrinkOptions {
            replays: 3,
            final_replays: 6,
            parallel: 1,
            budget: Duration::from_secs(7200),
            checkers: None,
            out: None,
            schedule_only: false,
            min_rate: 0.5,
            exe,
            interrupts: None,
        }
    }
}

/// How a shrink ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A minimal sequence that reproduces the failure was found (maybe the original one).
    Shrunk,
    /// The recorded sequence never reproduced the failure in its replays.
    NotReproduced,
    /// `--schedule-only`: the replay schedule was written, nothing was run.
    ScheduleOnly,
    /// A signal stopped it; the minimal sequence is the best found so far.
    Interrupted,
}

/// A fault sequence in the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sequence {
    pub faults: usize,
    pub time_limit_s: f64,
    /// Summed durations of its faults.
    pub fault_s: f64,
    /// One line per fault: "3.2s partition n1,n2 | n3 for 5s".
    pub steps: Vec<String>,
}

impl Sequence {
    fn of(c: &Candidate) -> Sequence {
        Sequence {
            faults: c.steps.len(),
            time_limit_s: c.time_limit.as_secs_f64(),
            fault_s: c.steps.iter().map(|s| s.duration.as_secs_f64()).sum(),
            steps: c.steps.iter().map(describe).collect(),
        }
    }
}

/// One step in words.
pub fn describe(s: &PlannedFault) -> String {
    let t = &s.template;
    let whom = match (&t.groups, &t.drops) {
        (Some(g), _) => g
            .iter()
            .map(|g| g.join(","))
            .collect::<Vec<_>>()
            .join(" | "),
        (_, Some(d)) => d
            .iter()
            .map(|(n, from)| {
                format!(
                    "{n} drops {}",
                    from.iter().cloned().collect::<Vec<_>>().join(",")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => t.target.describe(),
    };
    let clock = s
        .clock_delta_ms
        .map(|d| format!(" {d:+} ms"))
        .unwrap_or_default();
    format!(
        "at {} {} {whom}{clock} for {}",
        timed::secs(s.start),
        t.kind.name(),
        timed::secs(s.duration)
    )
}

/// What a shrink found (`shrink.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShrinkOutcome {
    pub run_dir: PathBuf,
    pub out: PathBuf,
    pub status: Status,
    /// The checkers whose failure had to reproduce.
    pub target: Vec<String>,
    pub original: Sequence,
    pub minimal: Sequence,
    /// The recorded sequence (`replay.toml`) and the minimal one (`minimal.toml`).
    pub replay_file: PathBuf,
    pub minimal_file: Option<PathBuf>,
    /// A command line that replays the minimal sequence.
    pub replay_command: String,
    /// The final replays of the minimal sequence: how many reproduced, of how many.
    pub reproduced: u32,
    pub final_replays: u32,
    pub candidates: usize,
    pub runs: Vec<search::Replay>,
    pub elapsed_s: f64,
    pub budget_s: f64,
    pub budget_exhausted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Minimal sequences set aside because they reproduced less often than `--min-rate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<String>,
}

impl ShrinkOutcome {
    /// The reproduction rate of the minimal sequence (0 when not measured).
    pub fn rate(&self) -> f64 {
        if self.final_replays == 0 {
            0.0
        } else {
            f64::from(self.reproduced) / f64::from(self.final_replays)
        }
    }

    /// The command's exit code: 1 the failure reproduces with the minimal sequence (the
    /// system is shown invalid), 2 it could not be reproduced, 0 schedule only, 130/143/129
    /// interrupted.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            Status::ScheduleOnly => exit::VALID,
            Status::Interrupted => self
                .interrupted
                .as_deref()
                .map(|s| match s {
                    "SIGTERM" => exit::SIGTERM,
                    "SIGHUP" => exit::SIGHUP,
                    _ => exit::SIGINT,
                })
                .unwrap_or(exit::SIGINT),
            Status::NotReproduced => exit::UNKNOWN,
            Status::Shrunk if self.reproduced > 0 => exit::INVALID,
            Status::Shrunk => exit::UNKNOWN,
        }
    }
}

/// Quiet after the last fault in a shortened run: enough for the checkers to see the cluster
/// after it (the final heal and recovery come on top).
const TAIL: Duration = Duration::from_secs(2);
/// The shortest quiet before the first fault (the cluster elects its first leader) and
/// between faults, and the shortest fault, that shortening tries.
const MIN_LEAD: Duration = Duration::from_millis(1500);
const MIN_GAP: Duration = Duration::from_millis(500);
const MIN_DURATION: Duration = Duration::from_millis(1000);

/// Shrinks the failing run in `run_dir`.
pub async fn shrink_run(run_dir: &Path, opts: &ShrinkOptions) -> Result<ShrinkOutcome> {
    let started = Instant::now();
    let run_dir = run_dir.canonicalize().map_err(|e| {
        bad_input(format!(
            "shrink {}: {e}; give a run folder such as reports/election/latest",
            run_dir.display()
        ))
    })?;
    let run = RunDir::open(&run_dir)?;
    let rec = timed::of_run(&run_dir)?;
    // A simulated failure is replayed in-process, once per candidate (the same seed and
    // schedule give the same run), on every core; its real arguments still make the commands.
    let sim = crate::commands::sim::replay::SimReplayer::of_run(&run_dir, &rec.info)?;
    let sim_opts;
    let (opts, mut args) = match sim {
        None => (
            opts,
            crate::commands::run::replay::recorded_args(&run, &rec.info)?,
        ),
        Some((_, ref real)) => {
            sim_opts = ShrinkOptions {
                replays: 1,
                final_replays: 1,
                parallel: std::thread::available_parallelism().map_or(1, |n| n.get()),
                ..opts.clone()
            };
            (&sim_opts, real.clone())
        }
    };
    args.seed = Some(rec.info.seed);
    let target = failing_checkers(&run, opts)?;
    let out = opts.out.clone().unwrap_or_else(|| run_dir.join("shrink"));
    prepare_out(&out)?;
    let original_limit = Duration::from_secs_f64(rec.info.time_limit_s);
    let original = Candidate::fitted(rec.steps.clone(), Duration::ZERO, FLOOR);
    let original = Candidate {
        time_limit: original.time_limit.max(original_limit),
        ..original
    };
    let (replay_file, replay_command) = write_replay(&out, &run_dir, &rec, &args, &original)?;
    let mut outcome = first_outcome(
        &run_dir,
        &out,
        &target,
        &original,
        replay_file,
        replay_command,
        opts,
    );
    if opts.schedule_only {
        report::write(&outcome)?;
        return Ok(outcome);
    }
    let sim = sim.map(|(replayer, _)| std::sync::Arc::new(replayer));
    let mut engine = engine(opts, &args, &out, target, sim, rec.fake_monotonic, started);
    // Three quarters of the budget to search, the rest for the final replays.
    let deadlines = (started + opts.budget.mul_f64(0.75), started + opts.budget);
    let (minimal, reproduced, replayed) =
        steady_minimal(&mut engine, &original, opts, &mut outcome, deadlines).await?;
    engine.progress.finish();
    outcome.status = match (&minimal, engine.interrupted) {
        (_, Some(_)) => Status::Interrupted,
        (None, None) => Status::NotReproduced,
        (Some(_), None) => Status::Shrunk,
    };
    if let Some(m) = &minimal {
        write_minimal(&mut outcome, m, (&rec, &original), &args)?;
    }
    outcome.reproduced = reproduced;
    outcome.final_replays = replayed;
    outcome.candidates = engine.candidates;
    outcome.runs = std::mem::take(&mut engine.runs);
    outcome.elapsed_s = started.elapsed().as_secs_f64();
    outcome.budget_exhausted = engine.budget_hit;
    outcome.interrupted = engine.interrupted.map(|s| s.name().to_string());
    report::write(&outcome)?;
    Ok(outcome)
}

/// The search's engine: replays of `args` (in-process for a simulated run: `sim`) into `out`,
/// nothing run yet, its progress counting down to the end of the budget.
fn engine(
    opts: &ShrinkOptions,
    args: &TestArgs,
    out: &Path,
    target: Vec<String>,
    sim: Option<std::sync::Arc<crate::commands::sim::replay::SimReplayer>>,
    fake_monotonic: bool,
    started: Instant,
) -> Engine {
    Engine {
        exe: opts.exe.clone(),
        args: args.clone(),
        dir: out.to_path_buf(),
        replays: opts.replays,
        parallel: opts.parallel,
        target,
        interrupts: opts.interrupts.clone(),
        sim,
        fake_monotonic,
        runs: Vec::new(),
        candidates: 0,
        interrupted: None,
        budget_hit: false,
        decided: Default::default(),
        progress: progress::Progress::new(started + opts.budget),
    }
}

/// The checkers whose failure must reproduce: those `--checkers` names, else every checker
/// the run's results.json found invalid.
fn failing_checkers(run_dir: &RunDir, opts: &ShrinkOptions) -> Result<Vec<String>> {
    let results = crate::commands::run::child::read_results(run_dir.path()).map_err(|e| {
        bad_input(format!(
            "{run_dir}: {e:#}; check the run first (fle-chaos check {run_dir})"
        ))
    })?;
    let invalid = crate::commands::run::child::invalid_checkers(&results);
    target_checkers(run_dir.path(), &invalid, opts.checkers.as_deref())
}

/// The outcome before any replay: the recorded sequence as both original and minimal, its
/// replay file and command, nothing run yet.
fn first_outcome(
    run_dir: &Path,
    out: &Path,
    target: &[String],
    original: &Candidate,
    replay_file: PathBuf,
    replay_command: String,
    opts: &ShrinkOptions,
) -> ShrinkOutcome {
    ShrinkOutcome {
        run_dir: run_dir.to_path_buf(),
        out: out.to_path_buf(),
        status: Status::ScheduleOnly,
        target: target.to_vec(),
        original: Sequence::of(original),
        minimal: Sequence::of(original),
        replay_file,
        minimal_file: None,
        replay_command,
        reproduced: 0,
        final_replays: 0,
        candidates: 0,
        runs: Vec::new(),
        elapsed_s: 0.0,
        budget_s: opts.budget.as_secs_f64(),
        budget_exhausted: false,
        interrupted: None,
        set_aside: Vec::new(),
    }
}

/// The shortest run a candidate is given.
const FLOOR: Duration = Duration::from_secs(1);

/// Writes `replay.toml` (what the nemesis did, as it did it, with the command that replays
/// it in its header); its path and that command.
fn write_replay(
    out: &Path,
    run_dir: &Path,
    rec: &timed::Recorded,
    args: &TestArgs,
    original: &Candidate,
) -> Result<(PathBuf, String)> {
    let replay_file = out.join("replay.toml");
    let replay_command = format!(
        "fle-chaos test {} --nemesis-file {}",
        command(args, original, out),
        replay_file.display()
    );
    let header = format!(
        "replay of {} (seed {}): what the nemesis did, as it did it\n{replay_command}",
        run_dir.display(),
        rec.info.seed,
    );
    std::fs::write(
        &replay_file,
        timed::to_toml(&original.steps, &header, rec.fake_monotonic),
    )
    .with_context(|| format!("cannot write {}", replay_file.display()))?;
    Ok((replay_file, replay_command))
}

/// Searches for a minimal candidate and measures it with the final replays: (the minimal
/// candidate, final replays that reproduced, final replays run). A candidate accepted on one
/// lucky replay may reproduce rarely: when its final replays reproduce less often than
/// `min_rate`, it is set aside (listed in `outcome.set_aside`) and the search resumes without
/// it (decided candidates are not replayed again), until a candidate holds, the original is
/// all that is left, the budget runs out or an interrupt comes. `deadlines`: (search, final).
async fn steady_minimal(
    engine: &mut Engine,
    original: &Candidate,
    opts: &ShrinkOptions,
    outcome: &mut ShrinkOutcome,
    (search_deadline, final_deadline): (Instant, Instant),
) -> Result<(Option<Candidate>, u32, u32)> {
    loop {
        let minimal = search(engine, original, FLOOR, search_deadline).await?;
        let (reproduced, replayed) = match (&minimal, engine.interrupted) {
            (Some(m), None) => {
                engine
                    .measure(m, opts.final_replays, final_deadline)
                    .await?
            }
            _ => (0, 0),
        };
        let Some(m) = &minimal else {
            return Ok((minimal, reproduced, replayed));
        };
        let enough = f64::from(reproduced) >= opts.min_rate * f64::from(replayed);
        let last_resort = m.steps == original.steps && m.time_limit == original.time_limit;
        if enough
            || replayed == 0
            || last_resort
            || engine.budget_hit
            || engine.interrupted.is_some()
        {
            return Ok((minimal, reproduced, replayed));
        }
        outcome.set_aside.push(format!(
            "{} faults, run {:.1} s: {reproduced} of {replayed} final replays reproduced",
            m.steps.len(),
            m.time_limit.as_secs_f64()
        ));
        engine.set_aside(m);
    }
}

/// Writes `minimal.toml` (or, when no fault is needed, a note to replay with `--nemesis none`)
/// and puts it and its replay command in the outcome.
fn write_minimal(
    outcome: &mut ShrinkOutcome,
    m: &Candidate,
    (rec, original): (&timed::Recorded, &Candidate),
    args: &TestArgs,
) -> Result<()> {
    let (run_dir, out) = (outcome.run_dir.clone(), outcome.out.clone());
    let file = out.join("minimal.toml");
    let cmd = command(args, m, &out);
    let header = format!(
        "minimal fault sequence of {} (seed {}): {} of {} faults, run {} s\nfle-chaos test {cmd} --nemesis-file {}",
        run_dir.display(),
        rec.info.seed,
        m.steps.len(),
        original.steps.len(),
        m.time_limit.as_secs_f64(),
        file.display()
    );
    if m.steps.is_empty() {
        std::fs::write(
            &file,
            format!(
                "# {}\n# no faults needed: replay with --nemesis none\n",
                header.replace('\n', "\n# ")
            ),
        )?;
        outcome.replay_command = format!("fle-chaos test {cmd} --nemesis none");
    } else {
        std::fs::write(&file, timed::to_toml(&m.steps, &header, rec.fake_monotonic))?;
        outcome.replay_command = format!("fle-chaos test {cmd} --nemesis-file {}", file.display());
    }
    outcome.minimal = Sequence::of(m);
    outcome.minimal_file = Some(file);
    Ok(())
}

/// The search (steps 1 to 3): the smallest candidate that still fails, or None when the
/// recorded sequence never reproduced the failure (or the budget ran out before it did).
async fn search(
    engine: &mut Engine,
    original: &Candidate,
    floor: Duration,
    deadline: Instant,
) -> Result<Option<Candidate>> {
    let n = original.steps.len();
    // Removing faults, at their recorded times, in runs as long as the original.
    let subset = |items: &[usize]| Candidate {
        steps: items.iter().map(|&i| original.steps[i].clone()).collect(),
        time_limit: original.time_limit,
    };
    let mut dd = ddmin::Ddmin::new((0..n).collect());
    // First round, at once: the recorded sequence (it must fail at all; it does not stop the
    // round), no fault (some failures need none), and ddmin's first chunks.
    let mut first: Vec<Candidate> = vec![original.clone()];
    if n > 0 {
        first.push(subset(&[]));
    }
    let lead = first.len();
    first.extend(dd.batch().iter().map(|b| subset(b)));
    let failed = engine.failing(&first, 1, deadline).await?;
    match failed[1..].iter().position(|f| *f) {
        // No fault needed: nothing to shorten but the run, which the original's length shows.
        Some(0) if n > 0 => return Ok(Some(first[1].clone())),
        Some(i) => dd.failed(Some(i + 1 - lead)),
        None if !failed[0] => return Ok(None),
        None => dd.failed(None),
    }
    while !dd.is_done() && engine.interrupted.is_none() && !engine.budget_hit {
        let cands: Vec<Candidate> = dd.batch().iter().map(|b| subset(b)).collect();
        let which = engine.first_failing(&cands, deadline).await?;
        dd.failed(which);
    }
    let mut best = subset(dd.current());
    // Shortening: the quiet tail, the quiet before and between faults, the durations. The
    // boldest cut and milder ones at once: the first to fail wins, and the bolder, shorter
    // runs end first.
    for _ in 0..2 {
        if engine.interrupted.is_some() || engine.budget_hit {
            break;
        }
        let mut cands: Vec<Candidate> = Vec::new();
        for level in [8, 2, 1, 0] {
            let mut steps = best.steps.clone();
            for _ in 0..level {
                steps = halve_durations(&halve_gaps(&steps));
            }
            let c = Candidate::fitted(steps, TAIL, floor);
            let shorter = c.time_limit < best.time_limit || c.steps != best.steps;
            if shorter
                && !cands
                    .iter()
                    .any(|x| x.steps == c.steps && x.time_limit == c.time_limit)
            {
                cands.push(c);
            }
        }
        if cands.is_empty() {
            break;
        }
        match engine.first_failing(&cands, deadline).await? {
            Some(i) => {
                best = cands[i].clone();
                if i == 0 {
                    break;
                }
            }
            None => break,
        }
    }
    Ok(Some(best))
}

/// The steps with every quiet stretch (before the first, between two) halved, down to
/// `MIN_LEAD` before the first and `MIN_GAP` between; durations and order kept.
fn halve_gaps(steps: &[PlannedFault]) -> Vec<PlannedFault> {
    let mut out: Vec<PlannedFault> = Vec::new();
    let mut prev_end_old = Duration::ZERO;
    let mut prev_end_new = Duration::ZERO;
    for (i, s) in steps.iter().enumerate() {
        let min = if i == 0 { MIN_LEAD } else { MIN_GAP };
        let gap = s.start.saturating_sub(prev_end_old);
        let new_gap = if gap <= min { gap } else { (gap / 2).max(min) };
        // Whole milliseconds, as the file writes them.
        let new_gap = Duration::from_millis(new_gap.as_millis() as u64);
        let mut n = s.clone();
        n.start = prev_end_new + new_gap;
        prev_end_old = prev_end_old.max(s.start + s.duration);
        prev_end_new = prev_end_new.max(n.start + n.duration);
        out.push(n);
    }
    out
}

/// The steps with every duration halved, down to `MIN_DURATION`; start times kept.
fn halve_durations(steps: &[PlannedFault]) -> Vec<PlannedFault> {
    steps
        .iter()
        .map(|s| {
            let mut n = s.clone();
            if s.duration > MIN_DURATION {
                n.duration =
                    Duration::from_millis(((s.duration / 2).max(MIN_DURATION)).as_millis() as u64);
                n.template.duration = Some(n.duration);
            }
            n
        })
        .collect()
}

/// The test arguments of a replay of `c` (without the nemesis flag), as one line.
fn command(args: &TestArgs, c: &Candidate, out: &Path) -> String {
    let mut argv = child::test_argv(args, c.time_limit, None);
    // Drop the trailing `--nemesis none` the caller replaces.
    argv.truncate(argv.len().saturating_sub(2));
    let place: [OsString; 4] = [
        "--out".into(),
        out.join("replays").into_os_string(),
        "--name".into(),
        "replay".into(),
    ];
    argv.iter()
        .chain(place.iter())
        .map(|a| {
            let a = a.to_string_lossy();
            if a.chars()
                .any(|c| c.is_whitespace() || "'\"$`\\".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The checkers whose failure must reproduce: `--checker`, else every invalid one.
fn target_checkers(
    run_dir: &Path,
    invalid: &[String],
    asked: Option<&[String]>,
) -> Result<Vec<String>> {
    if invalid.is_empty() {
        return Err(bad_input(format!(
            "{}: no checker judged this run invalid: there is no failure to shrink",
            run_dir.display()
        )));
    }
    let Some(asked) = asked else {
        return Ok(invalid.to_vec());
    };
    if asked.is_empty() {
        return Err(bad_input("--checker: name at least one checker"));
    }
    if let Some(other) = asked.iter().find(|a| !invalid.contains(a)) {
        return Err(bad_input(format!(
            "--checker {other}: the run did not fail it; it failed {} (results.json)",
            invalid.join(", ")
        )));
    }
    Ok(asked.to_vec())
}

/// Creates the output folder; one that holds an earlier shrink is not overwritten.
fn prepare_out(out: &Path) -> Result<()> {
    if out.join("shrink.json").exists() || out.join("replay.toml").exists() {
        return Err(bad_input(format!(
            "{}: holds an earlier shrink; remove it or pass --out DIR",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}

/// `fle-chaos shrink`: the CLI over [`shrink_run`].
pub async fn shrink(args: ShrinkArgs) -> Result<i32> {
    let budget = parse_duration(&args.budget)
        .ok()
        .filter(|b| !b.is_zero())
        .ok_or_else(|| {
            bad_input(format!(
                "--budget {}: give a positive duration like 45m, 90s or 2h",
                args.budget
            ))
        })?;
    if !(0.0..=1.0).contains(&args.min_rate) {
        return Err(bad_input(format!(
            "--min-rate {}: give a share between 0 and 1, e.g. 0.5",
            args.min_rate
        )));
    }
    let exe = std::env::current_exe().context("cannot find the fle-chaos executable")?;
    let opts = ShrinkOptions {
        replays: args.replays,
        final_replays: args.final_replays,
        parallel: args.parallel as usize,
        budget,
        checkers: args.checker.as_deref().map(|c| {
            c.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }),
        out: args.out.clone(),
        schedule_only: args.schedule_only,
        min_rate: args.min_rate,
        exe,
        interrupts: Some(Interrupts::install()?),
    };
    let outcome = shrink_run(&args.run_dir, &opts).await?;
    eprint!("{}", report::summary(&outcome));
    Ok(outcome.exit_code())
}
