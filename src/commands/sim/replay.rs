//! A simulated run replayed in-process, for `fle-chaos shrink` on a simulated failure: the
//! run's settings rebuilt from its test.json (the `simulate` flags it keeps), and each
//! candidate schedule run by the simulator with the run's seed in milliseconds instead of a
//! `fle-chaos test` child in a minute. The same seed and schedule give the same run, so one
//! replay decides a candidate. The minimal schedule it finds still says how to replay it on
//! real processes (`fle-chaos test` with the run's real arguments).

use super::cli::{settings, SimulateArgs};
use super::run::{simulate_one, SimSettings};
use crate::checker::Validity;
use crate::commands::run::child::ChildRun;
use crate::commands::run::plan::TestArgs;
use crate::exit::bad_input;
use crate::history::test_info::TestInfo;
use anyhow::Result;
use std::path::Path;
use std::time::{Duration, Instant};

/// A simulated run to replay with other schedules.
#[derive(Clone)]
pub struct SimReplayer {
    pub settings: SimSettings,
    pub seed: u64,
}

impl SimReplayer {
    /// The simulated run of `info`, rebuilt, and the `fle-chaos test` arguments that replay
    /// it on real processes; None for a real run.
    pub fn of_run(run_dir: &Path, info: &TestInfo) -> Result<Option<(SimReplayer, TestArgs)>> {
        if info.target != "sim" {
            return Ok(None);
        }
        let unusable = |why: String| {
            bad_input(format!(
                "{}: cannot rebuild the simulated run ({why}); shrink it with the fle-chaos that made it",
                run_dir.display()
            ))
        };
        let words = (info.settings.simulated.simulate_args.clone())
            .ok_or_else(|| unusable("test.json has no settings.simulate_args".into()))?;
        let args = SimulateArgs::from_words(&words).map_err(unusable)?;
        let (settings, _) = settings(&args).map_err(|e| unusable(format!("{e:#}")))?;
        let real = TestArgs::from_words(&settings.real_args).map_err(unusable)?;
        Ok(Some((
            SimReplayer {
                settings,
                seed: info.seed,
            },
            real,
        )))
    }

    /// The run again under the timed schedule `file` (None: no faults) for `limit` of
    /// simulated time; a run that is not valid is kept in `out` (test.json, history, results),
    /// as a child run's folder would be.
    pub fn replay(&self, file: Option<&Path>, limit: Duration, out: &Path) -> Result<ChildRun> {
        let started = Instant::now();
        let schedule = match file {
            None => crate::nemesis::schedule::Schedule::none(),
            Some(f) => {
                crate::nemesis::schedule_from_flags(
                    None,
                    Some(f),
                    None,
                    &crate::nemesis::Abilities::all(),
                )?
                .schedule
            }
        };
        let s = SimSettings {
            schedule,
            time_limit: limit,
            ..self.settings.clone()
        };
        let run = simulate_one(&s, self.seed);
        let run_dir = match run.results.valid {
            Validity::True => None,
            _ => Some(super::cli::write_folder(out, &run, None)?),
        };
        Ok(ChildRun {
            code: run.results.valid.exit_code(),
            run_dir,
            results: Some(run.results),
            duration: started.elapsed(),
            note: None,
            interrupted: None,
            cancelled: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::shrink::{shrink_run, ShrinkOptions, Status};

    /// `fle-chaos shrink` on a simulated failure of the seeded `follow-single-leading` bug:
    /// the candidates run in-process, the minimal sequence is smaller and still fails
    /// vote-rule, and its replay command runs `fle-chaos test` on real processes with the bug.
    #[test]
    fn shrink_works_on_a_simulated_failure_in_process() {
        let s = crate::commands::sim::cli::settings_of(&[
            "--bug",
            "follow-single-leading",
            "--time-limit",
            "30",
        ])
        .unwrap();
        let run = (1..=20)
            .map(|seed| super::simulate_one(&s, seed))
            .find(|r| r.failed().contains(&"vote-rule".to_string()))
            .expect("follow-single-leading found in 20 simulated runs");
        let tmp = tempfile::tempdir().unwrap();
        let dir = crate::commands::sim::cli::write_folder(tmp.path(), &run, Some("fle-chaos test"))
            .unwrap();
        let opts = ShrinkOptions {
            checkers: Some(vec!["vote-rule".into()]),
            ..ShrinkOptions::new("/nonexistent/fle-chaos".into())
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let o = rt.block_on(shrink_run(&dir, &opts)).unwrap();
        assert_eq!(o.status, Status::Shrunk, "{o:?}");
        assert!(o.minimal.faults < o.original.faults, "{o:?}");
        assert_eq!((o.reproduced, o.final_replays), (1, 1));
        let minimal = std::fs::read_to_string(o.minimal_file.as_ref().unwrap()).unwrap();
        assert!(
            minimal.contains("fle-chaos test") && minimal.contains("--bug follow-single-leading"),
            "{minimal}"
        );
    }
}
