//! Workloads: what clients do to the cluster during a run, read from `workloads/*.toml`.
//!
//! - `election`: observe only (the observers run in every workload).
//! - `writes`: N clients writing unique values through the current leader (`writes.rs`).
//! - `register`: N clients, each bound to a server, reading, syncing, setting and
//!   compare-and-setting K keys (`register.rs`).
//!
//! A workload is named by file (`--workload path/to/x.toml`) or short name (`--workload
//! writes` reads `workloads/writes.toml` in the current directory, else the copy built into
//! the binary). A bad file is a `BadInput` naming the file, the line and the fix.

pub mod observe;
pub mod register;
pub mod writes;

use crate::exit::bad_input;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The workloads shipped in `workloads/`, built in so short names work from any directory.
const BUILT_IN: &[(&str, &str)] = &[
    ("election", include_str!("../../workloads/election.toml")),
    ("writes", include_str!("../../workloads/writes.toml")),
    ("register", include_str!("../../workloads/register.toml")),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Election,
    Writes,
    Register,
}

impl Kind {
    /// Its name in workload files and test.json.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Election => "election",
            Kind::Writes => "writes",
            Kind::Register => "register",
        }
    }

    /// Whether its clients write (the nemesis aims at writes in flight only then).
    pub fn writes(self) -> bool {
        self != Kind::Election
    }
}

/// A parsed workload file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    /// Status reads per second per node.
    #[serde(default = "default_hz")]
    pub observe_hz: f64,
    /// Writes: concurrent clients.
    #[serde(default = "default_clients")]
    pub clients: usize,
    /// Writes: operations per second, all clients together.
    #[serde(default = "default_rate")]
    pub rate: f64,
    /// Writes: client-side timeout in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Register: how many keys the clients share.
    #[serde(default = "default_keys")]
    pub keys: usize,
}

fn default_hz() -> f64 {
    50.0
}
fn default_clients() -> usize {
    3
}
fn default_rate() -> f64 {
    20.0
}
fn default_timeout() -> u64 {
    3000
}
fn default_keys() -> usize {
    5
}

/// Finds and parses a workload by short name or path.
pub fn load(name_or_path: &str) -> Result<Workload> {
    let path = Path::new(name_or_path);
    if path.extension().is_some() || name_or_path.contains('/') {
        let text = std::fs::read_to_string(path).map_err(|e| {
            bad_input(format!(
                "--workload {name_or_path}: cannot read the file ({e}); give a workload file or one of: {}",
                names()
            ))
        })?;
        return parse(&text, path);
    }
    let local = PathBuf::from("workloads").join(format!("{name_or_path}.toml"));
    if let Ok(text) = std::fs::read_to_string(&local) {
        return parse(&text, &local);
    }
    match BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
        Some((n, text)) => parse(text, Path::new(&format!("(built-in) workloads/{n}.toml"))),
        None => Err(bad_input(format!(
            "--workload {name_or_path}: no such workload; use one of: {} (or a path to a .toml file)",
            names()
        ))),
    }
}

fn names() -> String {
    BUILT_IN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses workload TOML; errors name the file and line and say how to fix them.
pub fn parse(text: &str, path: &Path) -> Result<Workload> {
    let w: Workload = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        bad_input(format!(
            "{}{line}: {}; fix the file (fields: name, kind = \"election\"|\"writes\"|\"register\", observe_hz, clients, rate, timeout_ms, keys)",
            path.display(),
            e.message()
        ))
    })?;
    let bad = |what: &str| bad_input(format!("{}: {what}", path.display()));
    if !(w.observe_hz > 0.0 && w.observe_hz <= 1000.0) {
        return Err(bad("observe_hz must be in (0, 1000]; 50 is the default"));
    }
    if w.kind == Kind::Register && (w.keys == 0 || w.keys > 10_000) {
        return Err(bad("keys must be between 1 and 10000"));
    }
    if w.kind.writes() {
        if w.clients == 0 || w.clients > 1000 {
            return Err(bad("clients must be between 1 and 1000"));
        }
        if !(w.rate > 0.0 && w.rate <= 100_000.0) {
            return Err(bad(
                "rate must be a positive number of operations per second",
            ));
        }
        if w.timeout_ms == 0 {
            return Err(bad("timeout_ms must be positive"));
        }
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_workloads_parse() {
        for (name, text) in BUILT_IN {
            let w = parse(text, Path::new(name)).unwrap();
            assert_eq!(&w.name, name);
        }
    }

    #[test]
    fn bad_workload_names_file_and_line() {
        let err = parse("name = \"x\"\nkind = \"sing\"\n", Path::new("w.toml")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("w.toml:2"), "{msg}");
        assert_eq!(crate::exit::code_for(&err), crate::exit::BAD_ARGS);
        let err = parse(
            "name = \"x\"\nkind = \"writes\"\nrate = -1.0\n",
            Path::new("w.toml"),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("rate"));
    }
}
