//! Coverage carried across runs and nights: `OUT/coverage.json`, next to `trends.jsonl`, holds
//! every situation (`history::situation`) a sweep's runs met, with how many runs met it and the
//! sweep that met it first. A sweep hands each run, as it starts, the situations met before it
//! (this file's, plus those of the sweep's runs finished so far) in `steer/ID.json`, and the
//! run's steering nemesis prefers faults aimed at what none of them met (`nemesis::steer`).
//! The file is bounded by the vocabulary, not by the nights, so a nightly job can keep it.

use super::record::SweepRecord;
use crate::history::situation::{write_met_before, Situation};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub const FILE: &str = "coverage.json";

/// One situation met by some earlier run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    #[serde(flatten)]
    pub situation: Situation,
    /// Runs that met it, over every sweep recorded.
    pub runs: u64,
    /// The sweep that met it first ("nightly@2026-11-30T02:00:00Z").
    pub first_sweep: String,
}

/// `OUT/coverage.json`: what earlier sweeps met.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CarriedCoverage {
    /// The sweeps recorded in it.
    pub sweeps: Vec<String>,
    pub met: Vec<Carried>,
}

impl CarriedCoverage {
    /// Reads `out/coverage.json`; none yet is empty. A damaged file is said (`warn`) and
    /// treated as empty, as `trends.jsonl`'s bad lines are: a night must still run.
    pub fn read(out: &Path, warn: &mut dyn FnMut(String)) -> Result<CarriedCoverage> {
        let path = out.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(serde_json::from_str(&text).unwrap_or_else(|e| {
            warn(format!(
                "{}: not a carried coverage file ({e}); starting from none (delete it to silence this)",
                path.display()
            ));
            Self::default()
        }))
    }

    pub fn situations(&self) -> BTreeSet<Situation> {
        self.met.iter().map(|c| c.situation.clone()).collect()
    }

    /// Adds the situations `record`'s runs met; a sweep already recorded is not counted twice.
    pub fn add(&mut self, record: &SweepRecord) {
        let sweep = super::trends::sweep_name(record);
        if self.sweeps.contains(&sweep) {
            return;
        }
        let mut met: BTreeMap<Situation, Carried> = (self.met.drain(..))
            .map(|c| (c.situation.clone(), c))
            .collect();
        for run in &record.runs {
            for s in &run.situations {
                met.entry(s.clone())
                    .or_insert_with(|| Carried {
                        situation: s.clone(),
                        runs: 0,
                        first_sweep: sweep.clone(),
                    })
                    .runs += 1;
            }
        }
        self.met = met.into_values().collect();
        self.sweeps.push(sweep);
    }

    pub fn write(&self, out: &Path) -> Result<PathBuf> {
        let path = out.join(FILE);
        // Whole or not at all: the next night reads it.
        let tmp = out.join(format!(".{FILE}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

/// Adds `record` to `out/coverage.json` (a whole sweep, or a merged night).
pub fn update(out: &Path, record: &SweepRecord, warn: &mut dyn FnMut(String)) -> Result<PathBuf> {
    let mut carried = CarriedCoverage::read(out, warn)?;
    carried.add(record);
    carried.write(out)
}

/// Writes what a run starting now may take as met before it (`situations`) to
/// `dir/steer/ID.json`, for its `--met-before` (`history::situation::write_met_before`).
pub fn hand_over(dir: &Path, id: &str, situations: &BTreeSet<Situation>) -> Result<PathBuf> {
    let folder = dir.join("steer");
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let path = folder.join(format!("{id}.json"));
    write_met_before(&path, situations)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::situation::read_met_before;

    #[test]
    fn a_damaged_file_is_said_and_read_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut said = Vec::new();
        let none = CarriedCoverage::read(dir.path(), &mut |w| said.push(w)).unwrap();
        assert_eq!((none, said.len()), (CarriedCoverage::default(), 0));
        std::fs::write(dir.path().join(FILE), "{\"sweeps\": [").unwrap();
        let torn = CarriedCoverage::read(dir.path(), &mut |w| said.push(w)).unwrap();
        assert_eq!(torn, CarriedCoverage::default());
        assert!(said.len() == 1 && said[0].contains(FILE), "{said:?}");
    }

    #[test]
    fn a_hand_over_reads_back_and_a_bad_one_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let s: Situation = serde_json::from_value(serde_json::json!(
            {"kind": "kill", "who": "leader", "phase": "after-ack"}
        ))
        .unwrap();
        let file = hand_over(dir.path(), "r1", &[s.clone()].into()).unwrap();
        assert_eq!(read_met_before(&file).unwrap(), [s].into());
        std::fs::write(&file, "[{\"kind\": \"kill\"}]").unwrap();
        let e = read_met_before(&file).unwrap_err();
        assert!(e.contains("--met-before") && e.contains("r1.json"), "{e}");
    }
}
