//! Running one test from another stage (sweep, shrink, benches): `fle-chaos test ARGS` as a
//! child process (so a run that crashes or hangs cannot take its caller with it, and each run
//! tears down its own cluster exactly as a lone run does), its verdict from the exit code and
//! its details from `OUT/NAME/<timestamp>/results.json` through the typed `checker::Results`.
//!
//! Concurrent children are safe: each claims its own subnet and names (`control::backend::netns`
//! claims a free 10.a.b.0/24 with a lock file; names carry the run's id). A signal for the
//! caller, or the caller's cancel, is passed on to the child, which tears down and exits as an
//! interrupted run; a child that outlives its deadline is stopped the same way (SIGTERM, then
//! SIGKILL after a grace period).

use crate::checker::{Results, Validity};
use crate::commands::run::interrupt::Signal;
use crate::exit;
use crate::store::RunDir;
use anyhow::{Context, Result};
use nix::sys::signal::{kill, Signal as NixSignal};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long a signalled child may take to tear down before it is killed.
const TEARDOWN_GRACE: Duration = Duration::from_secs(60);

/// What a child run left.
#[derive(Debug)]
pub struct ChildRun {
    pub code: i32,
    /// Its run folder, when it made one.
    pub run_dir: Option<PathBuf>,
    /// results.json, when the checkers ran.
    pub results: Option<Results>,
    pub duration: Duration,
    /// Why there is no verdict (timed out, ...), when the runner knows more than the code.
    pub note: Option<String>,
    /// The caller's signal, when one stopped this run.
    pub interrupted: Option<Signal>,
    /// Stopped by the caller's cancel (not a signal) before it ended with a verdict of its own.
    pub cancelled: bool,
}

impl ChildRun {
    /// The checkers that judged the run invalid (none without results).
    pub fn invalid_checkers(&self) -> Vec<String> {
        self.results
            .as_ref()
            .map(invalid_checkers)
            .unwrap_or_default()
    }
}

/// Why the caller stops a child early.
pub enum Stop {
    /// The caller was interrupted: the child gets the same signal.
    Interrupted(Signal),
    /// The caller no longer needs the run: SIGTERM, so it tears down.
    Cancelled,
}

/// Which `fle-chaos` subcommand a child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildCommand {
    /// `test ARGS --out OUT --name NAME`: one run folder (test.json, results.json).
    Test,
    /// `simulate ARGS --out OUT/NAME`: one batch folder (summary.json; no results.json).
    Simulate,
}

/// Where a child run goes: `--out OUT --name NAME`, its stderr and stdout into `log`.
pub struct ChildPlace<'a> {
    pub out: &'a Path,
    pub name: &'a str,
    pub log: &'a Path,
    pub command: ChildCommand,
}

/// One child run: `exe test ARGS --out OUT --name NAME` (or `simulate`, see `ChildCommand`),
/// output into `log`, stopped when it outlives `deadline` or when `stop` resolves.
pub async fn run_child(
    exe: &Path,
    args: &[impl AsRef<OsStr>],
    place: ChildPlace<'_>,
    deadline: Option<Duration>,
    stop: impl Future<Output = Stop>,
) -> Result<ChildRun> {
    let start = Instant::now();
    let mut child = child_command(exe, args, &place)?;
    let ChildPlace {
        out, name, command, ..
    } = place;
    let mut child = child
        .spawn()
        .with_context(|| format!("cannot start {} test", exe.display()))?;
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let mut note = None;
    let mut interrupted = None;
    let mut cancelled = false;
    let limit = deadline;
    let deadline = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let status = tokio::select! {
        s = child.wait() => s?,
        why = stop => {
            let sig = match why {
                Stop::Interrupted(sig) => {
                    interrupted = Some(sig);
                    to_nix(sig)
                }
                Stop::Cancelled => {
                    cancelled = true;
                    NixSignal::SIGTERM
                }
            };
            stop_child(&mut child, pid, sig).await?
        }
        _ = deadline => {
            note = Some(format!(
                "did not finish within {:.0} s; stopped with SIGTERM",
                limit.unwrap_or_default().as_secs_f64()
            ));
            stop_child(&mut child, pid, NixSignal::SIGTERM).await?
        }
    };
    let code = exit_code(&status);
    // A run stopped for its deadline has no verdict: the tool failed to finish it.
    let code = if note.is_some() && interrupted.is_none() {
        exit::CRASHED
    } else {
        code
    };
    // Asked to stop, but it had ended with its own verdict: that verdict counts.
    let cancelled = cancelled && exit::is_interrupted(code);
    let (run_dir, results) = match command {
        ChildCommand::Test => {
            let run_dir = newest_run(&out.join(name));
            let results = run_dir.as_deref().and_then(|d| read_results(d).ok());
            (run_dir, results)
        }
        ChildCommand::Simulate => (newest_holding(&out.join(name), SIM_SUMMARY), None),
    };
    Ok(ChildRun {
        code,
        run_dir,
        results,
        duration: start.elapsed(),
        note,
        interrupted,
        cancelled,
    })
}

/// The child's command line (`test ... --out OUT --name NAME`, or `simulate ... --out
/// OUT/NAME`), its output into the place's log, and SIGTERM when its caller dies.
fn child_command(
    exe: &Path,
    args: &[impl AsRef<OsStr>],
    place: &ChildPlace<'_>,
) -> Result<tokio::process::Command> {
    let ChildPlace {
        out,
        name,
        log,
        command,
    } = *place;
    let log_file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut child = tokio::process::Command::new(exe);
    match command {
        ChildCommand::Test => child
            .arg("test")
            .args(args)
            .arg("--out")
            .arg(out)
            .arg("--name")
            .arg(name),
        ChildCommand::Simulate => child
            .arg("simulate")
            .args(args)
            .arg("--out")
            .arg(out.join(name)),
    };
    child
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    // A caller killed outright (SIGKILL: no handler passes the signal on) still stops its
    // run: the kernel sends it SIGTERM, and it tears its cluster down as on any signal.
    // SAFETY: prctl is async-signal-safe and touches only the child's own state.
    unsafe {
        child.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)
        });
    }
    Ok(child)
}

/// A finished child's exit code: its own, 128 + the signal that ended it, or CRASHED.
fn exit_code(status: &std::process::ExitStatus) -> i32 {
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(status),
    ) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => exit::CRASHED,
    }
}

fn to_nix(sig: Signal) -> NixSignal {
    match sig {
        Signal::Int => NixSignal::SIGINT,
        Signal::Term => NixSignal::SIGTERM,
        Signal::Hup => NixSignal::SIGHUP,
    }
}

/// Sends `sig` to the child (by its pid, which is ours: it has not been reaped), waits for it
/// to tear down, and kills it when it takes longer than `TEARDOWN_GRACE`.
async fn stop_child(
    child: &mut tokio::process::Child,
    pid: Option<Pid>,
    sig: NixSignal,
) -> Result<std::process::ExitStatus> {
    if let Some(pid) = pid {
        let _ = kill(pid, sig);
    }
    match tokio::time::timeout(TEARDOWN_GRACE, child.wait()).await {
        Ok(s) => Ok(s?),
        Err(_) => {
            let _ = child.start_kill();
            Ok(child.wait().await?)
        }
    }
}

/// The file a simulated batch's folder holds (`sim::summary`).
const SIM_SUMMARY: &str = "summary.json";

/// The newest run folder (holding test.json) under `OUT/NAME`.
pub fn newest_run(test_dir: &Path) -> Option<PathBuf> {
    newest_holding(test_dir, crate::history::test_info::TestInfo::FILE)
}

/// The newest folder under `dir` that holds `file`.
fn newest_holding(dir: &Path, file: &str) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.join(file).is_file())
        .collect();
    // Folder names are UTC timestamps: the last in order is the newest.
    runs.sort();
    runs.pop()
}

/// A run's results.json, typed; an error when the checkers did not run.
pub fn read_results(run_dir: &Path) -> Result<Results> {
    let run_dir = RunDir::open(run_dir)?;
    run_dir.results()?.with_context(|| {
        format!(
            "{run_dir} has no {}: the checkers did not run",
            crate::store::RESULTS
        )
    })
}

/// The names of the checkers that judged the run invalid.
pub fn invalid_checkers(r: &Results) -> Vec<String> {
    r.checkers
        .iter()
        .filter(|c| c.valid == Validity::False)
        .map(|c| c.name.clone())
        .collect()
}
