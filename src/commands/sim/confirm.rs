//! `fle-chaos simulate --confirm N`: the first N failing runs' schedules replayed on real
//! processes, each as a `fle-chaos test` child (`run::child`), one at a time. A simulated
//! failure is evidence; a real run invalid for a checker the simulated run failed is the
//! finding. The summary says for each which it was.

use super::run::SimSettings;
use super::summary::{Replay, SimSummary};
use crate::checker::Validity;
use crate::commands::run::child::{run_child, ChildCommand, ChildPlace, Stop};
use crate::commands::run::interrupt::Interrupts;
use crate::exit;
use std::time::Duration;

/// How long a replay may take beyond its time limit (start, final phase, checkers).
const MARGIN: Duration = Duration::from_secs(180);

/// Replays the first `n` failures of `summary` (lowest seeds first) and records each outcome.
pub async fn confirm(
    summary: &mut SimSummary,
    s: &SimSettings,
    n: usize,
    interrupts: &Interrupts,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let deadline = s.time_limit + s.recovery_timeout + MARGIN;
    let failures = (summary.results.iter_mut())
        .filter(|r| r.valid != Validity::True && r.folder.is_some())
        .take(n);
    for r in failures {
        if interrupts.received().is_some() {
            break;
        }
        let Some(folder) = r.folder.clone() else {
            continue;
        };
        let mut args = s.real_args.clone();
        args.extend([
            "--nemesis-file".to_string(),
            folder.join(crate::store::SCHEDULE).display().to_string(),
        ]);
        let out = folder.join("real");
        let log = folder.join("real.log");
        eprintln!(
            "fle-chaos simulate: replaying seed {} on real processes (log {})",
            r.seed,
            log.display()
        );
        let place = ChildPlace {
            out: &out,
            name: "replay",
            log: &log,
            command: ChildCommand::Test,
        };
        let stop = async { Stop::Interrupted(interrupts.wait().await) };
        r.replay = Some(
            match run_child(&exe, &args, place, Some(deadline), stop).await {
                Err(e) => Replay::error(format!("{e:#}")),
                Ok(child) => {
                    let valid = match child.code {
                        exit::VALID => Validity::True,
                        exit::INVALID => Validity::False,
                        _ => Validity::Unknown,
                    };
                    match &child.results {
                        None => Replay::error(format!(
                            "no verdict (exit {}{}); see {}",
                            child.code,
                            child
                                .note
                                .as_deref()
                                .map(|n| format!(": {n}"))
                                .unwrap_or_default(),
                            log.display()
                        )),
                        Some(results) => {
                            let failed = crate::commands::run::child::invalid_checkers(results);
                            Replay {
                                valid,
                                reproduced: valid == Validity::False
                                    && failed.iter().any(|c| r.failed.contains(c)),
                                failed,
                                folder: child.run_dir,
                                error: None,
                            }
                        }
                    }
                }
            },
        );
    }
    Ok(())
}
