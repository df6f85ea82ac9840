//! Sweeps: the nightly mode. `fle-chaos sweep [FILE]` runs a matrix (targets × workloads ×
//! nemesis schedules × node counts × seeds × seeded bugs) as child `fle-chaos test` runs,
//! several at once, within a wall-clock budget, and writes one sweep folder; `fle-chaos merge`
//! combines the folders of a sweep sharded over several machines; both add the night to the
//! trends.
//!
//! - `matrix`: the TOML file, its expansion into runs and `--shard I/N` slices;
//! - `runner`: parallel runs within the budget; `progress`: the live display;
//! - `record`: `sweep.json`, the typed record every page is written from;
//! - `summary`: summary.html and junit.xml; `merge`: shard folders into one;
//! - `trends` and `trends_plot`: `OUT/trends.jsonl`, `OUT/trends.html` and its PNGs;
//! - `carried`: `OUT/coverage.json`, the situations earlier runs met, handed to each run's
//!   steering nemesis.
//!
//! A sweep folder is `OUT/sweeps/<matrix>/<UTC time>[-shard-I-of-N]/` holding sweep.json,
//! summary.html, junit.xml, `runs/<run id>/<time>/` (each run's own folder and report) and
//! `logs/<run id>.log` (each child's stderr). The exit code is the worst run's
//! (`exit::worse`), or the signal's when one stopped the sweep.

pub mod carried;
pub mod keep;
pub mod matrix;
pub mod merge;
pub mod progress;
pub mod record;
pub mod resume;
pub mod runner;
pub mod summary;
pub mod trends;
pub mod trends_plot;

use crate::commands::run::interrupt::Interrupts;
use crate::commands::run::plan::{Net, Plan, TargetKind, TestArgs};
use crate::control::backend::os_setup::{self, Needs};
use crate::exit::{self, bad_input};
use anyhow::{Context, Result};
use clap::Args;
use keep::Keep;
use matrix::{Cell, Matrix, Shard};
use record::SweepRecord;
use std::path::{Path, PathBuf};

/// `fle-chaos sweep` options.
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// The matrix file (docs/nightly.md; the default is built in).
    #[arg(default_value = matrix::DEFAULT_FILE, value_name = "FILE")]
    pub file: PathBuf,
    /// Wall-clock budget ("45m", "2h", "90s"): no run starts that would not end within it;
    /// the runs left are listed as not started [default: no limit].
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Clusters at once, each on its own subnet (1 to 16).
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u16).range(1..=16))]
    pub parallel: u16,
    /// Run only the I-th of N deterministic slices of the matrix (CI matrix jobs, Indexed Jobs);
    /// `fle-chaos merge` combines the slices' folders.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Where sweeps and trends go: OUT/sweeps/<matrix>/<time>/, OUT/trends.html.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// Print the runs (of the shard) with their `fle-chaos test` arguments, run nothing.
    #[arg(long)]
    pub list: bool,
    /// The fle-node executable every run uses [default: fle-node next to fle-chaos].
    #[arg(long, value_name = "FILE")]
    pub node_binary: Option<PathBuf>,
    /// How nodes are networked [default: the matrix's `net`, else netns].
    #[arg(long, value_enum)]
    pub net: Option<Net>,
    /// Shrink each run judged invalid to its minimal fault sequence (`fle-chaos shrink`,
    /// docs/shrink.md), one after the other within what is left of --budget.
    #[arg(long)]
    pub shrink: bool,
    /// Which runs keep their whole folder: `invalid`, `unknown` (invalid and unknown runs) or
    /// `all`; the others keep their results and report only (docs/nightly.md).
    #[arg(long, value_enum, default_value_t = Keep::Unknown, value_name = "RUNS")]
    pub keep: Keep,
    /// Finish the sweep in this folder (OUT/sweeps/<matrix>/<time>): run only the runs it did
    /// not finish. The matrix, shard, --out, --keep, --node-binary and --net are the sweep's
    /// own; --budget, --parallel and --shrink are given anew.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "shard", "out", "list", "node_binary", "net", "keep"])]
    pub resume: Option<PathBuf>,
}

/// `fle-chaos merge` options.
#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The shard folders (OUT/sweeps/<matrix>/<time>-shard-I-of-N).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the trends are (OUT/trends.html) and, without --into, the merged folder goes.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub out: PathBuf,
    /// The merged folder [default: OUT/sweeps/<matrix>/<first start>-merged].
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
}

/// `fle-chaos merge`.
pub async fn merge(args: MergeArgs) -> Result<i32> {
    tokio::task::spawn_blocking(move || merge::merge(&args.dirs, &args.out, args.into.as_deref()))
        .await?
}

/// The `fle-chaos test` flags the sweep adds to every run.
fn pass_through(args: &SweepArgs) -> Vec<String> {
    let mut p = Vec::new();
    if let Some(b) = &args.node_binary {
        p.extend(["--node-binary".to_string(), b.display().to_string()]);
    }
    if let Some(n) = args.net {
        let n = match n {
            Net::Netns => "netns",
            Net::Loopback => "loopback",
        };
        p.extend(["--net".to_string(), n.to_string()]);
    }
    p
}

/// Validates every run as `fle-chaos test` would (before anything starts: a bad cell is one
/// line naming it), and sets up the OS once for all of them (children never race apt-get).
fn preflight(cells: &[Cell], m: &Matrix, extra: &[String]) -> Result<()> {
    let mut needs = Needs::default();
    let mut zookeeper = false;
    for cell in cells {
        if cell.is_sim() {
            // A simulated batch needs nothing of the machine; its flags are checked as
            // `simulate` checks them.
            crate::commands::sim::cli::settings_of(&cell.args(m))
                .map_err(|e| bad_input(format!("run {}: {e:#}; fix the matrix file", cell.id)))?;
            continue;
        }
        let mut argv = cell.args(m);
        argv.extend(extra.iter().cloned());
        let parsed = TestArgs::from_words(&argv)
            .map_err(|e| bad_input(format!("run {}: {e}; fix the matrix file", cell.id)))?;
        let plan =
            Plan::from_args(parsed).map_err(|e| bad_input(format!("run {}: {e:#}", cell.id)))?;
        let n = plan.needs();
        needs.netns |= n.netns;
        needs.iptables |= n.iptables;
        needs.faketime |= n.faketime;
        zookeeper |= plan.args.target == TargetKind::Zookeeper;
    }
    os_setup::ensure(needs, &mut |msg| eprintln!("fle-chaos sweep: {msg}"))?;
    if zookeeper {
        let java = crate::control::sut::zookeeper::launch::JvmOptions::default().java;
        crate::control::sut::zookeeper::os_setup::ensure(&java, &mut |m| {
            eprintln!("fle-chaos sweep: {m}")
        })?;
    }
    Ok(())
}

/// `fle-chaos sweep`.
pub async fn sweep(args: SweepArgs) -> Result<i32> {
    if let Some(dir) = args.resume.clone() {
        return resume_sweep(&dir, &args).await;
    }
    let m = Matrix::load(&args.file)?;
    let cells = m.slice(args.shard);
    if args.list {
        for c in &cells {
            println!(
                "{}\tfle-chaos {} {}",
                c.id,
                c.subcommand(),
                c.args(&m).join(" ")
            );
        }
        return Ok(exit::VALID);
    }
    if cells.is_empty() {
        return Err(bad_input(format!(
            "--shard {}: the matrix has only {} run(s), so this shard is empty; use fewer shards",
            args.shard.map(|s| s.to_string()).unwrap_or_default(),
            m.cells.len()
        )));
    }
    let budget = budget_of(&args, &m)?;
    let extra = pass_through(&args);
    preflight_all(&cells, &m, &extra).await?;
    let interrupts = Interrupts::install()?;
    let started_at = chrono::Utc::now();
    let stamp = started_at.format("%Y%m%dT%H%M%SZ").to_string();
    let dir = matrix::sweep_folder(&args.out, &m, &stamp, args.shard);
    for sub in ["runs", "logs"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {} (choose another --out)", dir.display()))?;
    }
    let dir = dir.canonicalize()?;
    let held = resume::hold(&dir)?;
    let copy = dir.join(resume::MATRIX_COPY);
    std::fs::write(&copy, &m.text).with_context(|| format!("cannot write {}", copy.display()))?;
    // What apt printed while the preflight set this machine up, if it installed anything.
    let setup = crate::control::backend::apt::take_transcript();
    if !setup.is_empty() {
        let log = dir.join("logs").join("apt.log");
        std::fs::write(&log, setup).with_context(|| format!("cannot write {}", log.display()))?;
    }
    eprintln!(
        "fle-chaos sweep: {} run(s) of {} ({} at once{}{}) into {}",
        cells.len(),
        m.origin,
        args.parallel,
        args.shard
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default(),
        budget_text(budget),
        dir.display()
    );
    let record = SweepRecord {
        format: record::FORMAT,
        matrix: m.name.clone(),
        origin: m.origin.clone(),
        matrix_ids: m.cells.iter().map(|c| c.id.clone()).collect(),
        shard: args.shard,
        merged_from: Vec::new(),
        started_at,
        finished_at: started_at,
        budget_s: budget.map(|b| b.as_secs_f64()),
        parallel: args.parallel as usize,
        runs: Vec::new(),
        skipped: Vec::new(),
        interrupted: None,
        exit_code: exit::VALID,
        in_progress: true,
        pass_through: extra,
        keep: args.keep,
    };
    let night = Night {
        _held: held,
        dir,
        out: args.out.clone(),
        matrix: m,
        record,
        cells,
        budget,
    };
    night.run(&args, &interrupts).await
}

/// `fle-chaos sweep --resume DIR`: the runs of DIR's night not yet finished.
async fn resume_sweep(dir: &Path, args: &SweepArgs) -> Result<i32> {
    let u = resume::open(dir)?;
    let budget = budget_of(args, &u.matrix)?;
    preflight_all(&u.left, &u.matrix, &u.record.pass_through).await?;
    let interrupts = Interrupts::install()?;
    eprintln!(
        "fle-chaos sweep: resuming {}: {} run(s) finished, {} left ({} at once{})",
        u.dir.display(),
        u.record.runs.len(),
        u.left.len(),
        args.parallel,
        budget_text(budget)
    );
    let night = Night {
        _held: u.held,
        dir: u.dir,
        out: u.out,
        matrix: u.matrix,
        record: u.record,
        cells: u.left,
        budget,
    };
    night.run(args, &interrupts).await
}

/// ", budget 45 min" for the first line, or nothing.
fn budget_text(budget: Option<std::time::Duration>) -> String {
    budget
        .map(|b| format!(", budget {}", crate::duration::span(b.as_secs_f64())))
        .unwrap_or_default()
}

/// `--budget`, refused when not even one run of the matrix fits it.
fn budget_of(args: &SweepArgs, m: &Matrix) -> Result<Option<std::time::Duration>> {
    let Some(b) = &args.budget else {
        return Ok(None);
    };
    let d = crate::nemesis::units::parse_duration(b)
        .map_err(|e| bad_input(format!("--budget {b}: {e}")))?;
    let one = runner::Estimate::new(m.time_limit).run();
    if d < one {
        return Err(bad_input(format!(
            "--budget {b}: not even one run fits (a run takes about {:.0} s: its {:.0} s \
             time limit plus about {:.0} s to start, recover and check); give a larger budget",
            one.as_secs_f64(),
            m.time_limit.as_secs_f64(),
            runner::FIRST_OVERHEAD.as_secs_f64()
        )));
    }
    Ok(Some(d))
}

/// `preflight` off the async threads (it may run apt).
async fn preflight_all(cells: &[Cell], m: &Matrix, extra: &[String]) -> Result<()> {
    let (cells, m, extra) = (cells.to_vec(), m.clone(), extra.to_vec());
    tokio::task::spawn_blocking(move || preflight(&cells, &m, &extra)).await?
}

/// A night about to run: a new sweep, or what is left of one being resumed.
struct Night {
    /// The folder's lock, held until the night's pages are written.
    _held: resume::Held,
    dir: PathBuf,
    out: PathBuf,
    matrix: Matrix,
    /// The record so far (in progress; the finished runs of a resumed sweep).
    record: SweepRecord,
    /// The runs to run now.
    cells: Vec<Cell>,
    budget: Option<std::time::Duration>,
}

impl Night {
    /// Runs the cells (the record on disk rewritten after each), shrinks, writes the pages.
    async fn run(self, args: &SweepArgs, interrupts: &Interrupts) -> Result<i32> {
        let started = std::time::Instant::now();
        let Night {
            dir,
            out,
            matrix: m,
            mut record,
            cells,
            budget,
            _held,
        } = self;
        record.in_progress = true;
        record.interrupted = None;
        record.skipped.clear();
        record.write(&dir)?;
        // A resumed run's earlier, unfinished attempt goes first (a new sweep has none).
        resume::remove_torn(&dir, &cells)?;
        // What earlier nights and this night's finished runs met: each run steers past it.
        let mut met_before =
            carried::CarriedCoverage::read(&out, &mut |w| eprintln!("fle-chaos sweep: {w}"))?
                .situations();
        met_before.extend(trends::situations_met(&record.runs).into_iter().cloned());
        let runner = runner::Runner {
            met_before,
            exe: std::env::current_exe().context("cannot find the fle-chaos executable")?,
            dir: dir.clone(),
            parallel: args.parallel as usize,
            budget,
            pass_through: record.pass_through.clone(),
            matrix: m.clone(),
            keep: record.keep,
            shrink: args.shrink,
        };
        let mut on_disk = record.clone();
        let mut checkpoint = |run: &record::RunRecord| {
            on_disk.runs.push(run.clone());
            if let Err(e) = on_disk.write(&dir) {
                eprintln!("fle-chaos sweep: {e:#}");
            }
        };
        let ran = runner.run(cells, interrupts, &mut checkpoint).await;
        record.runs.extend(ran.runs);
        record.skipped = ran.skipped;
        record.in_matrix_order();
        if args.shrink && ran.interrupted.is_none() {
            shrink_failures(&mut record.runs, &dir, budget, started, args, interrupts).await;
        }
        record.finished_at = chrono::Utc::now();
        record.budget_s = budget.map(|b| b.as_secs_f64());
        record.parallel = args.parallel as usize;
        record.interrupted = ran.interrupted.map(|s| s.name().to_string());
        record.in_progress = false;
        record.exit_code = match ran.interrupted {
            Some(sig) => sig.exit_code(),
            None => record.worst(),
        };
        finish(&dir, &out, &record)?;
        Ok(record.exit_code)
    }
}

/// The least time worth giving one shrink (a few replays of a short run).
const LEAST_SHRINK: std::time::Duration = std::time::Duration::from_secs(60);
/// A shrink's budget when the sweep has none.
const SHRINK_BUDGET: std::time::Duration = std::time::Duration::from_secs(1800);

/// `--shrink`: each run judged invalid (a failure, or a seeded bug caught) is shrunk in turn,
/// while the budget leaves room; its minimal schedule is linked from the summary. A shrink
/// that fails is said on stderr and the run keeps no minimal schedule.
async fn shrink_failures(
    runs: &mut [record::RunRecord],
    dir: &Path,
    budget: Option<std::time::Duration>,
    started: std::time::Instant,
    args: &SweepArgs,
    interrupts: &Interrupts,
) {
    for run in runs.iter_mut() {
        // A resumed night does not shrink again what it shrank before it stopped.
        // A simulated batch is many runs: each failing one is shrunk on its own
        // (`fle-chaos shrink SIM_DIR/seed-S`, in-process), not the batch.
        let invalid = run.verdict == Some(crate::checker::Validity::False)
            && run.minimal.is_none()
            && !run.cell.is_sim();
        let Some(run_dir) = run.run_dir.as_ref().filter(|_| invalid) else {
            continue;
        };
        let left = budget.map_or(SHRINK_BUDGET, |b| b.saturating_sub(started.elapsed()));
        if left < LEAST_SHRINK {
            eprintln!("fle-chaos sweep: no budget left to shrink {}", run.cell.id);
            continue;
        }
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let mut opts = crate::commands::shrink::ShrinkOptions::new(exe);
        opts.budget = left;
        opts.parallel = args.parallel as usize;
        opts.interrupts = Some(interrupts.clone());
        opts.out = Some(dir.join("shrink").join(&run.cell.id));
        match crate::commands::shrink::shrink_run(&dir.join(run_dir), &opts).await {
            Ok(outcome) => {
                run.minimal = outcome
                    .minimal_file
                    .as_deref()
                    .and_then(|f| f.strip_prefix(dir).ok())
                    .map(Path::to_path_buf);
            }
            Err(e) => eprintln!("fle-chaos sweep: shrinking {} failed: {e:#}", run.cell.id),
        }
    }
}

/// Writes the record and pages, adds a whole, uninterrupted sweep to the trends (a shard's
/// night is added by `merge`), and says where everything is.
fn finish(dir: &Path, out: &Path, record: &SweepRecord) -> Result<()> {
    record.write(dir)?;
    let (page, junit) = summary::write(dir, record)?;
    let failed = record
        .runs
        .iter()
        .filter(|r| r.outcome != exit::VALID)
        .count();
    eprintln!(
        "fle-chaos sweep: {} run(s), {failed} failed, {} not started{}",
        record.runs.len(),
        record.skipped.len(),
        match &record.interrupted {
            Some(s) => format!(", interrupted by {s} (runs in flight were torn down)"),
            None => String::new(),
        }
    );
    if !record.skipped.is_empty() {
        let ids: Vec<&str> = record.skipped.iter().map(|c| c.id.as_str()).collect();
        eprintln!("fle-chaos sweep: not started: {}", ids.join(", "));
    }
    eprintln!("fle-chaos sweep: summary {}", page.display());
    eprintln!("fle-chaos sweep: junit {}", junit.display());
    if record.shard.is_none() && record.interrupted.is_none() {
        let warn = &mut |w| eprintln!("fle-chaos sweep: {w}");
        let trends = trends::update(out, record, dir, warn)?;
        eprintln!("fle-chaos sweep: trends {}", trends.display());
        let carried = carried::update(out, record, warn)?;
        eprintln!("fle-chaos sweep: coverage {}", carried.display());
    }
    eprintln!("fle-chaos sweep: exit {}", record.exit_code);
    Ok(())
}
