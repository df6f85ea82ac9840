//! Starting a node under libfaketime, so the clock nemesis can move its wall clock.
//!
//! Each node gets its own control file (`nodes/<n>/faketime`, initially "+0"); the nemesis
//! rewrites it ("+5", "-600", "@2026-01-01 00:00:00", ...) and, with `FAKETIME_NO_CACHE=1`,
//! the node sees the change at its next clock read. Monotonic clocks stay real, like an NTP step.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Where Debian's libfaketime package puts the preload library.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The control file of a node, under its folder.
pub fn control_file(node_dir: &Path) -> PathBuf {
    node_dir.join("faketime")
}

/// A node's control file when it runs under libfaketime (`enabled`), as every Target reports it.
pub fn node_file(control: &dyn super::Control, node: &str, enabled: bool) -> Option<PathBuf> {
    if !enabled {
        return None;
    }
    control.node_dir(node).ok().map(|d| control_file(&d))
}

/// Creates the control file with no offset ("+0") unless it exists (a restarted node keeps
/// its skew, as a real machine's clock would).
pub fn prepare(node_dir: &Path) -> Result<PathBuf> {
    let file = control_file(node_dir);
    if !file.exists() {
        std::fs::write(&file, "+0\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(file)
}

/// The environment that starts a process under libfaketime driven by `file`, moving only its
/// wall clock (like an NTP step).
pub fn env(file: &Path) -> Vec<(String, String)> {
    env_with(file, false)
}

/// As `env`; with `fake_monotonic` the monotonic clock moves too (a VM whose clocks misbehave),
/// which also skews every timeout the process measures.
pub fn env_with(file: &Path, fake_monotonic: bool) -> Vec<(String, String)> {
    vec![
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        (
            "FAKETIME_TIMESTAMP_FILE".into(),
            file.to_string_lossy().into_owned(),
        ),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
        (
            "FAKETIME_DONT_FAKE_MONOTONIC".into(),
            if fake_monotonic { "0" } else { "1" }.into(),
        ),
    ]
}
