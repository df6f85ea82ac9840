//! The resource registry: every namespace, link, iptables rule/chain, process, subnet claim and
//! file a run creates is written down *before* it is created, in two places: the run folder
//! (`resources.jsonl`, the record people read) and a fixed registry directory (so that
//! `fle-chaos clean` finds the leftovers of a SIGKILLed controller without knowing the run
//! folder). Teardown and `clean` remove exactly what is listed here and nothing else.

pub use super::resource::Resource;
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The fixed directory where every live run lists its resources.
/// Root uses /run (a tmpfs: it empties on reboot, exactly when namespaces and processes vanish).
pub fn registry_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FLE_CHAOS_REGISTRY") {
        return PathBuf::from(dir);
    }
    if crate::control::is_root() {
        PathBuf::from("/run/fle-chaos")
    } else {
        PathBuf::from(format!("/tmp/fle-chaos-{}", unsafe { libc::getuid() }))
    }
}

/// The list of one run's resources, appended as they are created. Generic over what it
/// records (a run's records are `Resource`s; the registry only writes them down and keeps them
/// in order).
pub struct Registry<R = Resource> {
    run_id: String,
    global: PathBuf,
    local: PathBuf,
    inner: Mutex<Vec<R>>,
}

impl Registry<Resource> {
    /// Starts the registry of run `run_id` in `registry_dir()`, recording the controller itself
    /// first.
    pub fn create(run_id: &str, run_dir: &Path) -> Result<Self> {
        Self::create_in(&registry_dir(), run_id, run_dir)
    }

    /// `create`, listing the run in `dir` rather than `registry_dir()` (`FLE_CHAOS_REGISTRY` is
    /// the whole process's environment: tests side by side pass their own here).
    pub fn create_in(dir: &Path, run_id: &str, run_dir: &Path) -> Result<Self> {
        let pid = std::process::id();
        let controller = Resource::Controller {
            pid,
            start_time: process_start_time(pid).unwrap_or(0),
            run_dir: run_dir.to_path_buf(),
        };
        Registry::open(dir, run_id, run_dir, controller)
    }
}

impl<R: Serialize + Clone> Registry<R> {
    /// Starts the registry of run `run_id`: `DIR/RUN_ID.jsonl` and `RUN_DIR/resources.jsonl`,
    /// each with `owner` (what `clean` must leave alone while it lives) as its first line.
    pub fn open(dir: &Path, run_id: &str, run_dir: &Path, owner: R) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the registry directory {}", dir.display()))?;
        let registry = Registry {
            run_id: run_id.to_string(),
            global: dir.join(format!("{run_id}.jsonl")),
            local: run_dir.join("resources.jsonl"),
            inner: Mutex::new(Vec::new()),
        };
        // The global file appears with its owner line already in it (written aside, then
        // hard-linked into place): `clean` never sees a run's file without the owner it must
        // leave alone.
        let first = format!("{}\n", serde_json::to_string(&owner)?);
        let aside = dir.join(format!(".{run_id}.tmp"));
        // hard_link, not rename: it fails when another run took the same id.
        let linked = std::fs::write(&aside, &first)
            .and_then(|()| std::fs::hard_link(&aside, &registry.global));
        let _ = std::fs::remove_file(&aside);
        linked.with_context(|| format!("cannot create {}", registry.global.display()))?;
        std::fs::write(&registry.local, &first)
            .with_context(|| format!("cannot write {}", registry.local.display()))?;
        registry.inner.lock().unwrap().push(owner);
        Ok(registry)
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn global_path(&self) -> &Path {
        &self.global
    }

    /// Writes `resource` down in both lists. Call it before creating the resource, so that a
    /// crash in between leaves a record of something that may not exist (harmless) rather than
    /// a resource nobody knows about.
    pub fn record(&self, resource: R) -> Result<()> {
        let mut line = serde_json::to_string(&resource)?;
        line.push('\n');
        for path in [&self.global, &self.local] {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot append to {}", path.display()))?;
            f.write_all(line.as_bytes())?;
        }
        self.inner.lock().unwrap().push(resource);
        Ok(())
    }

    /// Everything recorded so far, in creation order.
    pub fn resources(&self) -> Vec<R> {
        self.inner.lock().unwrap().clone()
    }

    /// Called once everything is torn down: the run no longer owns anything.
    pub fn release(&self) {
        let _ = std::fs::remove_file(&self.global);
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&self.local) {
            let _ = writeln!(f, "{{\"kind\":\"torn-down\"}}");
        }
    }
}

/// Reads a registry file; unknown or torn lines are skipped (a killed controller may tear one).
pub fn read_resources<R: DeserializeOwned>(path: &Path) -> Result<Vec<R>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The start time of a process (field 22 of /proc/PID/stat, clock ticks since boot): with the
/// pid it identifies a process uniquely, so a recycled pid is never mistaken for ours.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A process's parent pid, from /proc/PID/stat.
pub fn process_parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// When a process that started `start_time` clock ticks after boot ([`process_start_time`])
/// started, on the wall clock (boot time has whole seconds).
pub fn process_started_at(start_time: u64) -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf reads a constant of the C library; no memory is shared.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|&t| t > 0)?;
    let after_boot = std::time::Duration::from_millis(start_time.saturating_mul(1000) / ticks);
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(boot) + after_boot)
}

/// The environment variable that marks a process the tool started (`Resource::Spawn`).
pub const SPAWN_ENV: &str = "FLC_SPAWN";

/// Every live process whose environment holds `FLC_SPAWN=<token>` for one of `tokens`, with
/// that token: the processes spawned with them and whatever they started (children inherit the
/// environment). One pass over /proc, whatever the number of tokens (a long run restarts nodes
/// hundreds of times). A zombie's environment reads empty, so a killed process is not found.
pub fn processes_with_spawn_tokens<'a>(tokens: &[&'a str]) -> Vec<(u32, &'a str)> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let prefix = format!("{SPAWN_ENV}=");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let token = env
            .split(|b| *b == 0)
            .find_map(|var| var.strip_prefix(prefix.as_bytes()))
            .and_then(|t| tokens.iter().find(|want| want.as_bytes() == t));
        if let Some(token) = token {
            found.push((pid, *token));
        }
    }
    found
}

/// The command name of a process (/proc/PID/comm).
pub fn process_comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// True when `pid` is alive and is the very process that was recorded (same start time).
pub fn is_same_process(pid: u32, start_time: u64) -> bool {
    process_start_time(pid) == Some(start_time) && !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            rest.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}
