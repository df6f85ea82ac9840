//! Helpers shared by the controller's end-to-end tests: the binaries, polling with a deadline,
//! and finding and checking what a run created (from its `resources.jsonl`).

use fle_chaos::control::backend::local::{LocalCluster, NetMode};
use fle_chaos::control::backend::registry::{is_same_process, read_resources, Registry, Resource};
use fle_chaos::control::Control;
use fle_chaos::history::{Event, EventType, F, NEMESIS};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn fle_chaos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
}

/// The fle-node under test: this crate's, or FLE_CHAOS_TEST_NODE (another build of it).
pub fn fle_node() -> String {
    std::env::var("FLE_CHAOS_TEST_NODE").unwrap_or_else(|_| {
        fle_chaos::control::sut::fle_node::built_binary()
            .to_string_lossy()
            .into_owned()
    })
}

/// Starts `fle-chaos test ARGS --out OUT --node-binary NODE` in the background, output to
/// files under `out`.
pub fn spawn_test(args: &[&str], out: &Path, node: &str) -> std::process::Child {
    test_command(args, out, node).spawn().unwrap()
}

/// `spawn_test`'s command, not started yet (to give it an environment of its own).
pub fn test_command(args: &[&str], out: &Path, node: &str) -> Command {
    let log = std::fs::File::create(out.with_extension("stderr")).unwrap();
    let mut cmd = fle_chaos();
    cmd.arg("test")
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--node-binary")
        .arg(node)
        .stdout(std::process::Stdio::null())
        .stderr(log);
    cmd
}

/// Waits for `child` to exit within `timeout`; returns its exit code.
pub fn wait_exit(child: &mut std::process::Child, timeout: Duration) -> Option<i32> {
    let mut code = None;
    wait_for(timeout, || match child.try_wait() {
        Ok(Some(s)) => {
            code = Some(s.code().unwrap_or(-1));
            true
        }
        _ => false,
    });
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    code
}

/// True when running as root; otherwise prints why the test is skipped.
pub fn root_or_skip(test: &str) -> bool {
    let root = fle_chaos::control::is_root();
    if !root {
        super::skip::skip(
            test,
            "needs root (network namespaces, veth links, a bridge)",
        );
    }
    root
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The single run folder under `out` (out/<name>/<timestamp>), once it exists.
pub fn run_dir(out: &Path) -> Option<PathBuf> {
    let latest = out.join("latest");
    latest
        .exists()
        .then(|| latest.canonicalize().ok())
        .flatten()
}

/// What each checker that did not judge the run valid said, with its measurements: for a
/// test's failure message, so a run that failed on a CI machine explains itself.
pub fn why_not_valid(run_dir: &Path) -> String {
    match fle_chaos::commands::run::child::read_results(run_dir) {
        Err(e) => format!("{e:#}"),
        Ok(r) => r
            .checkers
            .iter()
            .filter(|c| c.valid != fle_chaos::checker::Validity::True)
            .map(|c| {
                let m = serde_json::to_string(&c.measurements).unwrap_or_default();
                format!(
                    "{} ({:?}): {}
measurements: {m}",
                    c.name, c.valid, c.explanation
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The nemesis's completed actions of kind `f` in a history.
pub fn nemesis_done(history: &[Event], f: F) -> Vec<&Event> {
    history
        .iter()
        .filter(|e| e.process == NEMESIS && e.f == f && e.kind == EventType::Info)
        .collect()
}

/// The resources a run recorded.
pub fn resources(run_dir: &Path) -> Vec<Resource> {
    read_resources(&run_dir.join("resources.jsonl")).unwrap_or_default()
}

/// How many processes the run has started so far.
pub fn started_processes(run_dir: &Path) -> usize {
    resources(run_dir)
        .iter()
        .filter(|r| matches!(r, Resource::Process { .. }))
        .count()
}

/// Every recorded resource that still exists on the machine, described.
pub fn leftovers(resources: &[Resource]) -> Vec<String> {
    let mut left = Vec::new();
    for r in resources {
        match r {
            Resource::Netns { name } if Path::new("/run/netns").join(name).exists() => {
                left.push(format!("namespace {name}"))
            }
            Resource::Link { name } if Path::new("/sys/class/net").join(name).exists() => {
                left.push(format!("link {name}"))
            }
            Resource::Process {
                pid, start_time, ..
            } if is_same_process(*pid, *start_time) => left.push(format!("process {pid}")),
            Resource::LazyFs { mount, .. }
                if fle_chaos::control::fault::lazyfs::is_mounted(mount) =>
            {
                left.push(format!("lazyfs mount {}", mount.display()))
            }
            Resource::Subnet { claim, .. } if claim.exists() => {
                left.push(format!("subnet claim {}", claim.display()))
            }
            Resource::SshControl { dir } => {
                let masters = fle_chaos::control::backend::ssh::masters_in(dir);
                if dir.exists() || !masters.is_empty() {
                    left.push(format!("ssh masters {masters:?} in {}", dir.display()));
                }
            }
            _ => {}
        }
    }
    // iptables chains live in the namespaces: gone with them. Check the host too.
    if let Ok(out) = Command::new("iptables").args(["-w", "-S"]).output() {
        let rules = String::from_utf8_lossy(&out.stdout).to_string();
        for r in resources {
            if let Resource::Chain {
                chain, netns: None, ..
            } = r
            {
                if rules.contains(chain.as_str()) {
                    left.push(format!("chain {chain}"));
                }
            }
        }
    }
    left
}

/// A cluster that is torn down when dropped, also when an assertion fails.
pub struct Cluster(pub LocalCluster);

impl std::ops::Deref for Cluster {
    type Target = LocalCluster;
    fn deref(&self) -> &LocalCluster {
        &self.0
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.0.teardown();
    }
}

pub fn cluster(mode: NetMode, n: usize, dir: &std::path::Path) -> Cluster {
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    let registry = Arc::new(Registry::create(&run_id, dir).unwrap());
    let nodes = (1..=n).map(|i| format!("n{i}")).collect();
    Cluster(LocalCluster::create(mode, nodes, dir, registry).unwrap())
}

/// Runs `f` on a thread that has joined namespace `ns`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let file = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    std::thread::spawn(move || {
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0
        );
        f()
    })
    .join()
    .unwrap()
}

/// The zombies (state Z) named fle-node, java or fle-chaos (a sweep's or shrink's run) that started at or after `since` (clock ticks
/// since boot) and whose parent is neither a live controller nor this test binary (both reap
/// their own): what a controller that exited without reaping left for PID 1 (or whichever init
/// adopts them). `since`: `registry::process_start_time` of the test process.
pub fn orphaned_zombies(since: u64) -> Vec<String> {
    let stat_of = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    // (comm, fields after the comm) of a /proc/PID/stat.
    let split = |stat: &str| -> Option<(String, Vec<String>)> {
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        Some((comm, rest.split_whitespace().map(str::to_string).collect()))
    };
    let mut found = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        let Some((comm, f)) = stat_of(&pid).as_deref().and_then(split) else {
            continue;
        };
        // After the comm: state, ppid, ..., starttime (field 22 of stat, index 19 here).
        let (state, ppid, start) = (&f[0], &f[1], f[19].parse::<u64>().unwrap_or(0));
        if state != "Z"
            || start < since
            || !["fle-node", "java", "fle-chaos"].contains(&comm.as_str())
        {
            continue;
        }
        // This test binary's own clusters (other tests, in process) reap theirs too.
        if ppid.parse() == Ok(std::process::id()) {
            continue;
        }
        let parent = stat_of(ppid).as_deref().and_then(split).map(|(c, _)| c);
        if parent.as_deref() != Some("fle-chaos") {
            found.push(format!("{pid} ({comm}, parent {ppid})"));
        }
    }
    found
}
