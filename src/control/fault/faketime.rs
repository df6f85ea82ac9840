//! Starting a node under libfaketime, so the clock nemesis can move its wall clock.
//!
//! Each node gets its own control file (`nodes/<n>/faketime`, initially "+0"); the nemesis
//! rewrites it ("+5", "-600", "@2026-01-01 00:00:00", ...) and, with `FAKETIME_NO_CACHE=1`,
//! the node sees the change at its next clock read. Monotonic clocks stay real, like an NTP step.
//! `FaketimeClock` is the `Clock` a target running its nodes this way hands the nemesis.

use crate::control::fault::clock::{is_reset, Clock, ClockChange, ClockSetting, Mechanism};
use crate::control::Control;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where Debian's libfaketime package puts the preload library.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The control file's name in a node's folder.
const FILE: &str = "faketime";

/// The control file of a node, under its folder.
pub fn control_file(node_dir: &Path) -> PathBuf {
    node_dir.join(FILE)
}

/// A node's control file when it runs under libfaketime (`enabled`), as every Target reports it.
pub fn node_file(
    control: &dyn crate::control::Control,
    node: &str,
    enabled: bool,
) -> Option<PathBuf> {
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

/// The clocks of nodes started under libfaketime: their control files, written and read through
/// the `Control`, so that they land where the node runs (a remote host too).
pub struct FaketimeClock {
    control: Arc<dyn Control>,
}

impl FaketimeClock {
    pub fn new(control: Arc<dyn Control>) -> Self {
        FaketimeClock { control }
    }
}

impl Clock for FaketimeClock {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Libfaketime
    }

    fn set(&self, node: &str, setting: ClockSetting) -> Result<ClockChange> {
        let path = self
            .control
            .write_file(node, Path::new(FILE), setting.faketime_text().as_bytes())
            .with_context(|| format!("cannot write the clock file of {node}"))?;
        Ok(ClockChange::File(path))
    }

    fn skew_left(&self, node: &str) -> Result<Option<String>> {
        let text =
            String::from_utf8_lossy(&self.control.read_file(node, Path::new(FILE))?).into_owned();
        Ok((!is_reset(&text)).then(|| text.trim().to_string()))
    }
}
