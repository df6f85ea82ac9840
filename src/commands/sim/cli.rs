//! `fle-chaos simulate`: many seeded runs of a simulated fle-node cluster, on every core, each
//! judged by the checkers; only runs that are not valid keep a folder (test.json, history,
//! results, report, and `schedule.toml`: the faults as a timed schedule that `fle-chaos test
//! --nemesis-file` replays on real processes). One summary, and the worst verdict as the
//! exit code.

use super::run::{simulate_one, SimRun, SimSettings};
use super::server::Timing;
use super::summary::{RunSummary, SimSummary};
use crate::checker::Validity;
use crate::commands::run::interrupt::Interrupts;
use crate::exit::bad_input;
use crate::nemesis::env::Steering;
use crate::nemesis::schedule::Schedule;
use crate::nemesis::steer::Strategy;
use crate::store::RunDir;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// How many runs (run i uses seed S+i), as `test --test-count` [default: 100, or as many
    /// as `--budget` allows].
    #[arg(long = "test-count", alias = "runs", value_name = "N")]
    pub runs: Option<u64>,
    /// Wall time to spend ("90s", "5m"): no run starts after it.
    #[arg(long, value_name = "DURATION", value_parser = crate::nemesis::units::parse_duration)]
    pub budget: Option<Duration>,
    /// The first run's seed.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// Runs at once (default: the machine's cores).
    #[arg(long, value_name = "K")]
    pub parallel: Option<usize>,
    /// Number of simulated servers n1..nN (1 to 9).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub nodes: usize,
    /// Observers, as `test --observers`: the last K of --nodes, or names such as `n4,n5`.
    #[arg(long, value_name = "K|n4,n5,..")]
    pub observers: Option<String>,
    /// Workload, as `test --workload`: writes (clients write through the leader) or election.
    #[arg(long, default_value = "writes", value_name = "NAME|FILE")]
    pub workload: String,
    /// Fault kinds, as `test --nemesis` (default: the built-in `mixed`, less what the
    /// simulator cannot model).
    #[arg(long, value_name = "KIND,..")]
    pub nemesis: Option<String>,
    /// A fault schedule, as `test --nemesis-file`: a file or a built-in name; takes
    /// precedence over --nemesis.
    #[arg(long, value_name = "NAME|FILE")]
    pub nemesis_file: Option<PathBuf>,
    /// Mean seconds between faults, as `test --nemesis-interval` [default: 10 with --nemesis
    /// KINDS; else the schedule's own `interval`, which this replaces].
    #[arg(long, value_name = "SECONDS")]
    pub nemesis_interval: Option<f64>,
    /// Order of the planned faults, as `test --nemesis-strategy`: `steered` brings forward
    /// those aimed at situations the run has not met yet; `random` keeps the seeded order.
    #[arg(long, value_enum, default_value_t = Strategy::Steered, value_name = "STRATEGY")]
    pub nemesis_strategy: Strategy,
    /// Seeded fle-node bugs, as `fle-node --bug` (see `fle-node --list-bugs`).
    #[arg(long, value_name = "BUG,..")]
    pub bug: Option<String>,
    /// Simulated seconds per run.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub time_limit: f64,
    /// Stop at the first run that is not valid.
    #[arg(long)]
    pub until_invalid: bool,
    /// Where failing runs' folders and the summary go: OUT/sim-<timestamp>/.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Replay the first N failing runs' schedules on real processes (`fle-chaos test`, root),
    /// one at a time; the summary says for each whether the real run reproduced it.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub confirm: usize,
    /// How many times `--confirm` replays each failure: the summary gives each failure's
    /// reproduction rate (a timing-dependent bug may show in some real runs only).
    #[arg(long, default_value_t = 1, value_name = "K", requires = "confirm",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub confirm_replays: u32,
    /// Run every seed twice and fail on any difference in its history.
    #[arg(long, conflicts_with = "explore")]
    pub check_determinism: bool,
    /// Explore instead of one fresh seed per run: keep the inputs (a seed and its faults at
    /// their times) whose runs reached a transition or cluster state no run reached before,
    /// and mostly run mutations of them (docs/simulate.md, Exploration).
    #[arg(long)]
    pub explore: bool,
    /// Refused: the simulator runs fle-node's own code, never ZooKeeper (kept so the flag
    /// gets that answer rather than "unexpected argument").
    #[arg(long, hide = true, value_name = "VERSION")]
    pub zookeeper_version: Option<String>,
    /// ZooKeeper tickTime in milliseconds, as `test --tick-ms`.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub tick_ms: u64,
    /// ZooKeeper initLimit, in ticks.
    #[arg(long, default_value_t = 10, value_name = "TICKS")]
    pub init_limit: u32,
    /// ZooKeeper syncLimit, in ticks.
    #[arg(long, default_value_t = 5, value_name = "TICKS")]
    pub sync_limit: u32,
}

impl SimulateArgs {
    /// `simulate`'s flags parsed from words (a run folder's, for shrink); the error is clap's
    /// first line.
    pub fn from_words(words: &[String]) -> std::result::Result<SimulateArgs, String> {
        #[derive(clap::Parser)]
        struct Simulate {
            #[command(flatten)]
            args: SimulateArgs,
        }
        let argv = std::iter::once("simulate".to_string()).chain(words.iter().cloned());
        <Simulate as clap::Parser>::try_parse_from(argv)
            .map(|s| s.args)
            .map_err(|e| crate::commands::run::plan::first_line(&e))
    }
}

/// The settings `fle-chaos simulate WORDS` runs with (benches, tests, shrink's rebuild of a
/// run); bad words are one line (254), as on the command line.
pub fn settings_of<S: AsRef<str>>(words: &[S]) -> Result<SimSettings> {
    let words: Vec<String> = words.iter().map(|w| w.as_ref().to_string()).collect();
    let args = SimulateArgs::from_words(&words).map_err(bad_input)?;
    Ok(settings(&args)?.0)
}

/// What the simulator cannot model yet, for a fault or composed part (None: it can): its
/// kind's `Fault::cannot_simulate`.
pub fn cannot_model(f: &crate::nemesis::schedule::FaultTemplate) -> Option<&'static str> {
    crate::nemesis::faults::of(f.kind).cannot_simulate(f)
}

/// Why the simulator cannot reach a seeded bug (None: it can): these live in the node's async
/// shells, which the simulator models rather than runs.
pub fn cannot_reach(bug: fle_node::bugs::Bug) -> Option<&'static str> {
    use fle_node::bugs::Bug;
    match bug {
        Bug::BlockingConnect => Some("it lives in peers.rs's connect, not simulated"),
        Bug::DeafOnTruncated => Some("it needs truncated frames, not simulated"),
        Bug::WallClockTimeouts => Some(
            "the simulator times silences on the monotonic clock, as the real shells do unless this bug is on",
        ),
        Bug::ReadsWithoutQuorum | Bug::SyncBeforeApplied | Bug::CasOnStaleVersion => Some(
            "it lives in the data tree's HTTP handlers, which the simulator does not run",
        ),
        Bug::RemovedVoterCounted | Bug::RemovedLeaderKeepsLeading => {
            Some("it needs a reconfig, which the simulator does not run")
        }
        _ => None,
    }
}

/// A workload or schedule named by a file: its absolute path, so that a run folder's commands
/// work from any directory (a built-in name stays as it is).
fn absolute_if_file(name: &str) -> String {
    match Path::new(name).is_file() {
        true => std::path::absolute(name).map_or(name.to_string(), |p| p.display().to_string()),
        false => name.to_string(),
    }
}

/// The settings of every run, from the flags; bad input is one line (exit 254).
#[allow(
    clippy::too_many_lines,
    reason = "one block per flag, each refusing its own bad input in one line"
)]
pub fn settings(a: &SimulateArgs) -> Result<(SimSettings, Vec<String>)> {
    if a.runs == Some(0) {
        return Err(bad_input("--test-count 0: give at least one run"));
    }
    if a.budget == Some(Duration::ZERO) {
        return Err(bad_input("--budget 0: give a wall time such as 90s or 5m"));
    }
    if !(1..=9).contains(&a.nodes) {
        return Err(bad_input(format!(
            "--nodes {}: the simulator runs 1 to 9 servers",
            a.nodes
        )));
    }
    if !(a.time_limit.is_finite() && a.time_limit > 0.0 && a.time_limit <= 3600.0) {
        return Err(bad_input(format!(
            "--time-limit {}: give simulated seconds in (0, 3600]",
            a.time_limit
        )));
    }
    if a.tick_ms == 0 || a.init_limit == 0 || a.sync_limit == 0 {
        return Err(bad_input(
            "--tick-ms, --init-limit and --sync-limit must be at least 1",
        ));
    }
    if a.parallel == Some(0) {
        return Err(bad_input("--parallel 0: give at least 1"));
    }
    let bugs = match &a.bug {
        None => fle_node::bugs::Bugs::none(),
        Some(list) => fle_node::bugs::Bugs::parse(list)
            .map_err(|e| bad_input(format!("--bug {list}: {e}; see fle-node --list-bugs")))?,
    };
    if let Some((info, why)) = bugs
        .iter()
        .find_map(|b| cannot_reach(b.bug).map(|w| (b, w)))
    {
        return Err(bad_input(format!(
            "--bug {}: the simulator cannot reach it ({why}); run it on real processes with fle-chaos test",
            info.name
        )));
    }
    if let Some(v) = &a.zookeeper_version {
        return Err(bad_input(format!(
            "--zookeeper-version {v}: the simulator runs fle-node's own code, not ZooKeeper; run \
             a ZooKeeper release with fle-chaos test --target zookeeper --zookeeper-version {v}"
        )));
    }
    let names: Vec<String> = (1..=a.nodes as u64)
        .map(crate::history::node_name)
        .collect();
    let observers = crate::commands::run::plan::observers_of(a.observers.as_deref(), &names)?;
    let workload = crate::workload::load(&a.workload)?;
    if workload.kind == crate::workload::Kind::Register {
        return Err(bad_input(format!(
            "--workload {}: the simulator does not serve the data tree yet; run it on real \
             nodes with fle-chaos test --workload {}",
            a.workload, a.workload
        )));
    }
    let interval = a
        .nemesis_interval
        .map(|s| crate::commands::run::plan::positive_seconds("--nemesis-interval", s))
        .transpose()?;
    let chosen = crate::nemesis::schedule_from_flags(
        a.nemesis.as_deref(),
        a.nemesis_file.as_deref(),
        interval,
        &crate::nemesis::Abilities::all(),
    )?;
    let mut schedule: Schedule = chosen.schedule;
    let explicit = a.nemesis.is_some() || a.nemesis_file.is_some();
    let mut left_out = Vec::new();
    if let Some((f, why)) = schedule
        .faults
        .iter()
        .flat_map(|f| f.self_and_parts())
        .find_map(|f| cannot_model(f).map(|w| (f, w)))
    {
        if explicit {
            let at = f.line.map(|l| format!(" (line {l})")).unwrap_or_default();
            return Err(bad_input(format!(
                "the simulator cannot model {why}{at}; drop that fault from the schedule or run it on real processes with fle-chaos test"
            )));
        }
    }
    schedule.faults.retain(|f| {
        let keep = f.self_and_parts().all(|p| cannot_model(p).is_none());
        if !keep {
            left_out.push(f.group_name().unwrap_or_else(|| f.kind.name().to_string()));
        }
        keep
    });
    let timing = Timing {
        tick: Duration::from_millis(a.tick_ms),
        init_limit: a.init_limit,
        sync_limit: a.sync_limit,
        finalize_wait: fle_node::election::INITIAL_NOTIFICATION_TIMEOUT,
        max_notification_interval: Duration::from_secs(60),
        bugs,
    };
    let mut real_args: Vec<String> = [
        ("--nodes", a.nodes.to_string()),
        ("--workload", absolute_if_file(&a.workload)),
        ("--time-limit", a.time_limit.to_string()),
        ("--tick-ms", a.tick_ms.to_string()),
        ("--init-limit", a.init_limit.to_string()),
        ("--sync-limit", a.sync_limit.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect();
    if let Some(b) = &a.bug {
        real_args.extend(["--bug".to_string(), b.clone()]);
    }
    if let Some(o) = &a.observers {
        real_args.extend(["--observers".to_string(), o.clone()]);
    }
    let mut argv = real_args.clone();
    if let Some(n) = &a.nemesis {
        argv.extend(["--nemesis".to_string(), n.clone()]);
    }
    if let Some(gap) = a.nemesis_interval {
        argv.extend(["--nemesis-interval".to_string(), gap.to_string()]);
    }
    if a.nemesis_strategy != Strategy::Steered {
        let word = a.nemesis_strategy.word().to_string();
        argv.extend(["--nemesis-strategy".to_string(), word]);
    }
    if let Some(f) = &a.nemesis_file {
        argv.extend([
            "--nemesis-file".to_string(),
            absolute_if_file(&f.display().to_string()),
        ]);
    }
    let steering = Steering {
        strategy: a.nemesis_strategy,
        met_before: Default::default(),
        writes: workload.kind.writes(),
    };
    let s = SimSettings {
        nodes: a.nodes,
        observers,
        time_limit: Duration::from_secs_f64(a.time_limit),
        workload,
        schedule,
        steering,
        timing,
        recovery_timeout: Duration::from_secs(30),
        max_events: super::world::MAX_EVENTS,
        command: format!("fle-chaos simulate {}", argv.join(" ")),
        argv,
        real_args,
    };
    Ok((s, left_out))
}

pub async fn simulate(args: SimulateArgs) -> Result<i32> {
    let (settings, left_out) = settings(&args)?;
    for l in &left_out {
        eprintln!(
            "fle-chaos: left out of the default schedule: {l} (the simulator cannot model it)"
        );
    }
    let interrupts = Interrupts::install()?;
    let (a, s, i) = (args.clone(), settings.clone(), interrupts.clone());
    let (mut summary, out) = tokio::task::spawn_blocking(move || run_all(&a, &s, &i)).await??;
    if args.confirm > 0 {
        let (n, k) = (args.confirm, args.confirm_replays as usize);
        super::confirm::confirm(&mut summary, &settings, (n, k), &interrupts).await?;
    }
    let path = summary.write(&out)?;
    println!("{}; summary {}", summary.line(), path.display());
    for r in summary.failures() {
        if let Some(f) = &r.folder {
            println!(
                "  seed {}: {} ({}); on real processes: {}\n    replay: {} {}",
                r.seed,
                r.valid.word(),
                r.failed.join(", "),
                super::summary::replays_text(&r.replays),
                settings.real_command(),
                f.join(crate::store::SCHEDULE).display()
            );
        }
    }
    let signal = interrupts
        .received()
        .map_or(crate::exit::VALID, |s| s.exit_code());
    // No run finished (interrupted at once): nothing was tested, which is never a pass.
    let tested = match summary.runs {
        0 => crate::exit::UNKNOWN,
        _ => summary.exit_code,
    };
    Ok(crate::exit::worse(tested, signal))
}

/// Why the batch stops before its next run, if it should.
struct Stop {
    why: Mutex<Option<String>>,
    flag: AtomicBool,
}

impl Stop {
    fn now(&self, why: impl Into<String>) {
        let mut w = self.why.lock().unwrap();
        if w.is_none() {
            *w = Some(why.into());
        }
        self.flag.store(true, Ordering::Relaxed);
    }
}

/// The runs, each judged, failures kept under `out`; the summary not yet written.
fn run_all(
    a: &SimulateArgs,
    s: &SimSettings,
    interrupts: &Interrupts,
) -> Result<(SimSummary, PathBuf)> {
    let parallel = a
        .parallel
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let total = a
        .runs
        .unwrap_or(if a.budget.is_some() { u64::MAX } else { 100 });
    let started_at = chrono::Utc::now();
    let out = a
        .out
        .join(format!("sim-{}", started_at.format("%Y%m%dT%H%M%S%.3f")));
    std::fs::create_dir_all(&out)
        .map_err(|e| bad_input(format!("--out {}: cannot create it ({e})", a.out.display())))?;
    let stop = Stop {
        why: Mutex::new(None),
        flag: AtomicBool::new(false),
    };
    let done: Mutex<Vec<RunSummary>> = Mutex::new(Vec::new());
    let started = Instant::now();
    let mismatch: Mutex<Option<u64>> = Mutex::new(None);
    let writing = Mutex::new(());
    let go_on = || {
        if let Some(sig) = interrupts.received() {
            stop.now(format!("interrupted by {}", sig.name()));
        }
        if a.budget.is_some_and(|b| started.elapsed() >= b) {
            stop.now("the budget ran out");
        }
        !stop.flag.load(Ordering::Relaxed)
    };
    // A finished run: judged, its folder kept when it is not valid, counted.
    let keep = |name: String, run: SimRun, explored: Option<super::explore::ExploredRun>| {
        let seed = run.info.seed;
        let valid = run.results.valid;
        // One folder at a time: each report also rewrites the folder's index.html.
        let folder = (valid != Validity::True).then(|| {
            let _one = writing.lock().unwrap_or_else(|e| e.into_inner());
            write_folder_as(&out, &name, &run, Some(&s.real_command()))
                .map_err(|e| eprintln!("fle-chaos: {e:#}"))
                .ok()
        });
        if valid != Validity::True && a.until_invalid {
            stop.now(format!("{name} was {} (--until-invalid)", valid.word()));
        }
        let mut d = done.lock().unwrap();
        d.push(RunSummary {
            seed,
            valid,
            failed: run.failed(),
            folder: folder.flatten(),
            replays: Vec::new(),
            explored,
        });
        progress(&d, a.runs, started);
    };
    let exploration = match a.explore {
        true => Some(super::explore::explore(
            s,
            a.seed,
            total,
            parallel,
            go_on,
            |e| {
                let name = format!("explore-{}-seed-{}", e.index + 1, e.input.seed);
                let how = super::explore::ExploredRun {
                    run: e.index,
                    made: e.input.made.clone(),
                };
                let mut run = e.run;
                if e.input.made != super::explore::Made::Fresh {
                    run.info.replay_command = explored_replay(s, &out.join(&name), run.info.seed);
                }
                keep(name, run, Some(how));
                !stop.flag.load(Ordering::Relaxed)
            },
        )),
        false => {
            super::batch::run_seeds(s, a.seed, total, parallel, go_on, |seed, run| {
                if a.check_determinism && simulate_one(s, seed).history != run.history {
                    *mismatch.lock().unwrap() = Some(seed);
                    stop.now(format!("seed {seed} was not deterministic"));
                }
                keep(format!("seed-{seed}"), run, None);
            });
            None
        }
    };
    eprintln!();
    if let Some(seed) = *mismatch.lock().unwrap() {
        anyhow::bail!(
            "seed {seed} gave two different histories: the simulator is not deterministic (a bug: report it with the seed)"
        );
    }
    let mut summary = SimSummary::new(
        s.command.clone(),
        started_at,
        started.elapsed().as_secs_f64(),
        stop.why.into_inner().unwrap(),
        done.into_inner().unwrap(),
    );
    summary.exploration = exploration;
    Ok((summary, out))
}

/// The command that re-runs a mutated input's run kept in `folder`: its faults are its own,
/// not its seed's plan, so they come from its schedule.toml.
fn explored_replay(s: &SimSettings, folder: &Path, seed: u64) -> String {
    format!(
        "fle-chaos simulate {} --nemesis-file {} --runs 1 --seed {seed}",
        s.real_args.join(" "),
        folder.join(crate::store::SCHEDULE).display()
    )
}

fn progress(done: &[RunSummary], total: Option<u64>, started: Instant) {
    let n = done.len() as u64;
    if n % 50 != 0 && Some(n) != total {
        return;
    }
    let bad = |v| done.iter().filter(|r| r.valid == v).count();
    eprint!(
        "\rfle-chaos simulate: {n}{} runs, {:.0} runs/s, invalid {}, unknown {}   ",
        total.map(|t| format!("/{t}")).unwrap_or_default(),
        n as f64 / started.elapsed().as_secs_f64().max(1e-9),
        bad(Validity::False),
        bad(Validity::Unknown)
    );
}

/// Writes a run that is not valid as a run folder `out/seed-S`: test.json, history.jsonl and
/// results.json; with `real_command` (the command that replays it on real processes) also its
/// faults as `schedule.toml` and its report.
pub fn write_folder(
    out: &Path,
    run: &super::run::SimRun,
    real_command: Option<&str>,
) -> Result<PathBuf> {
    write_folder_as(out, &format!("seed-{}", run.info.seed), run, real_command)
}

/// [`write_folder`] under the folder name `name` (an explored run's, whose seed other runs of
/// the exploration share).
pub fn write_folder_as(
    out: &Path,
    name: &str,
    run: &super::run::SimRun,
    real_command: Option<&str>,
) -> Result<PathBuf> {
    let dir = RunDir::create_at(out.join(name))?;
    dir.save_info(&run.info)?;
    let history = dir.path().join(crate::history::file::PLAIN);
    std::fs::write(&history, &run.history)
        .with_context(|| format!("cannot write {}", history.display()))?;
    dir.save_results(&run.results)?;
    let Some(real_command) = real_command else {
        return Ok(dir.path().to_path_buf());
    };
    let recorded = crate::nemesis::timed::of_run(dir.path())?;
    let header = format!(
        "Faults of simulated run seed {} ({}), as timed steps: replay with\n{real_command} <this file>",
        run.info.seed, run.info.replay_command,
    );
    dir.save_schedule(&crate::nemesis::timed::to_toml(
        &recorded.steps,
        &header,
        false,
    ))?;
    // The report of what the run holds: its results as judged, its history read once.
    let (loaded, lines) = crate::checker::load_run::<crate::report::scan::LineFold>(&dir)?;
    crate::report::render(&dir, &loaded, Some(&run.results), lines)?;
    Ok(dir.path().to_path_buf())
}
