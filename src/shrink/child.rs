//! One replay: `fle-chaos test` as a child process (CONTRACTS.md "Running a test from another
//! stage"), with the recorded run's settings, a timed schedule and a run length of its own.
//! The verdict comes from the exit code, the details from the run's results.json through the
//! typed `checker::Results`. A child is stopped with SIGTERM (never SIGKILL): it tears its
//! cluster down and exits 143, so nothing is left behind.

use crate::checker::{Results, Validity};
use crate::exit;
use crate::run::plan::{Net, TargetKind, TestArgs};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What one child run showed.
#[derive(Debug, Clone)]
pub struct ChildRun {
    pub code: i32,
    /// Its run folder (OUT/latest), when it made one.
    pub run_dir: Option<PathBuf>,
    /// The checkers it judged invalid.
    pub invalid: Vec<String>,
    pub took: Duration,
    /// Stopped by us (SIGTERM) before it ended.
    pub cancelled: bool,
}

/// The `fle-chaos test` arguments that replay `args` for `time_limit` under `nemesis`
/// (`--nemesis-file FILE`, or None: `--nemesis none`), into `out`.
pub fn test_argv(
    args: &TestArgs,
    time_limit: Duration,
    nemesis: Option<&Path>,
    out: &Path,
    name: &str,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = Vec::new();
    let mut flag = |f: &str, value: String| {
        v.push(f.into());
        v.push(value.into());
    };
    flag("--nodes", args.nodes.to_string());
    flag("--time-limit", format!("{:.3}", time_limit.as_secs_f64()));
    flag("--workload", args.workload.clone());
    if let Some(seed) = args.seed {
        flag("--seed", seed.to_string());
    }
    if let Some(c) = args.concurrency {
        flag("--concurrency", c.to_string());
    }
    if let Some(r) = args.rate {
        flag("--rate", r.to_string());
    }
    flag(
        "--net",
        match args.net {
            Net::Netns => "netns",
            Net::Loopback => "loopback",
        }
        .into(),
    );
    flag(
        "--target",
        match args.target {
            TargetKind::Fle => "fle",
            TargetKind::Zookeeper => "zookeeper",
        }
        .into(),
    );
    flag("--tick-ms", args.tick_ms.to_string());
    flag("--init-limit", args.init_limit.to_string());
    flag("--sync-limit", args.sync_limit.to_string());
    flag("--recovery-timeout", args.recovery_timeout.to_string());
    if let Some(b) = &args.bug {
        flag("--bug", b.clone());
    }
    if let Some(ms) = args.finalize_wait_ms {
        flag("--finalize-wait-ms", ms.to_string());
    }
    flag("--name", name.into());
    let s = &args.ssh;
    if s.ssh {
        if let Some(u) = &s.ssh_user {
            flag("--ssh-user", u.clone());
        }
        if let Some(p) = s.ssh_port {
            flag("--ssh-port", p.to_string());
        }
        if !s.ssh_strict_host_key_checking {
            flag("--ssh-strict-host-key-checking", "false".into());
        }
    }
    let mut path = |f: &str, p: &Path| {
        v.push(f.into());
        v.push(p.as_os_str().to_owned());
    };
    path("--out", out);
    match nemesis {
        Some(file) => path("--nemesis-file", file),
        None => {
            v.push("--nemesis".into());
            v.push("none".into());
        }
    }
    if let Some(b) = &args.node_binary {
        v.push("--node-binary".into());
        v.push(b.as_os_str().to_owned());
    }
    if s.ssh {
        v.push("--ssh".into());
        for (f, p) in [
            ("--nodes-file", &s.nodes_file),
            ("--ssh-private-key", &s.ssh_private_key),
            ("--ssh-config", &s.ssh_config),
        ] {
            if let Some(p) = p {
                v.push(f.into());
                v.push(p.as_os_str().to_owned());
            }
        }
        if s.real_clock_skew {
            v.push("--real-clock-skew".into());
        }
    }
    if args.faketime {
        v.push("--faketime".into());
    }
    v
}

/// Runs `exe test ARGV` (output to `out/child.log`) until it exits, or until `cancel` turns
/// true: then it is sent SIGTERM and awaited (it tears its cluster down).
pub async fn run_child(
    exe: &Path,
    argv: &[OsString],
    out: &Path,
    mut cancel: watch::Receiver<bool>,
) -> Result<ChildRun> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let log = std::fs::File::create(out.join("child.log"))
        .with_context(|| format!("cannot create {}", out.join("child.log").display()))?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(exe)
        .arg("test")
        .args(argv)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {} test", exe.display()))?;
    let pid = child.id();
    let mut cancelled = false;
    let status = tokio::select! {
        s = child.wait() => s?,
        _ = async { let _ = cancel.wait_for(|c| *c).await; } => {
            cancelled = true;
            if let Some(pid) = pid {
                // Our own child, by its pid: SIGTERM lets it tear its cluster down.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            child.wait().await?
        }
    };
    let code = status.code().unwrap_or(exit::CRASHED);
    // Asked to stop, but it had ended with its own verdict: that verdict counts.
    let cancelled = cancelled && exit::is_interrupted(code);
    let latest = out.join("latest");
    let run_dir = latest.canonicalize().ok();
    let invalid = run_dir
        .as_deref()
        .and_then(|d| read_results(d).ok())
        .map(|r| invalid_checkers(&r))
        .unwrap_or_default();
    Ok(ChildRun {
        code,
        run_dir,
        invalid,
        took: started.elapsed(),
        cancelled,
    })
}

/// A run's results.json, typed.
pub fn read_results(run_dir: &Path) -> Result<Results> {
    let path = run_dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not results.json", path.display()))
}

/// The names of the checkers that judged the run invalid.
pub fn invalid_checkers(r: &Results) -> Vec<String> {
    r.checkers
        .iter()
        .filter(|c| c.valid == Validity::False)
        .map(|c| c.name.clone())
        .collect()
}
