//! `fle-chaos simulate --confirm N`: the first N failing runs' schedules replayed on real
//! processes, each as a `fle-chaos test` child (`run::child`), one at a time. A simulated
//! failure is evidence; a real run invalid for a checker the simulated run failed is the
//! finding. The summary says for each which it was.

use super::run::SimSettings;
use super::summary::{Replay, SimSummary};
use crate::checker::Validity;
use crate::commands::run::child::{run_child, ChildCommand, ChildPlace, Stop};
use crate::commands::run::interrupt::Interrupts;
use std::time::Duration;

/// How long a replay may take beyond its time limit (start, final phase, checkers).
const MARGIN: Duration = Duration::from_secs(180);

/// Replays the first `n` failures of `summary` (lowest seeds first) `k` times each, one run at
/// a time, and records each outcome.
pub async fn confirm(
    summary: &mut SimSummary,
    s: &SimSettings,
    (n, k): (usize, usize),
    interrupts: &Interrupts,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let failures = (summary.results.iter_mut())
        .filter(|r| r.valid != Validity::True && r.folder.is_some())
        .take(n);
    for r in failures {
        let Some(folder) = r.folder.clone() else {
            continue;
        };
        for i in 1..=k {
            if interrupts.received().is_some() {
                return Ok(());
            }
            // One replay keeps the folder names it always had; several are numbered.
            let (name, log) = match k {
                1 => ("replay".to_string(), folder.join("real.log")),
                _ => (format!("replay-{i}"), folder.join(format!("real-{i}.log"))),
            };
            eprintln!(
                "fle-chaos simulate: replaying seed {} on real processes ({i} of {k}; log {})",
                r.seed,
                log.display()
            );
            let replay = replay_once(&exe, s, (&folder, &name, &log), &r.failed, interrupts).await;
            r.replays.push(replay);
        }
    }
    Ok(())
}

/// One real run of the schedule in `folder` (into `folder/real/NAME`, its output in `log`):
/// reproduced when it is invalid for a checker of `failed`.
async fn replay_once(
    exe: &std::path::Path,
    s: &SimSettings,
    (folder, name, log): (&std::path::Path, &str, &std::path::Path),
    failed: &[String],
    interrupts: &Interrupts,
) -> Replay {
    let deadline = s.time_limit + s.recovery_timeout + MARGIN;
    let mut args = s.real_args.clone();
    args.extend([
        "--nemesis-file".to_string(),
        folder.join(crate::store::SCHEDULE).display().to_string(),
    ]);
    let out = folder.join("real");
    let place = ChildPlace {
        out: &out,
        name,
        log,
        command: ChildCommand::Test,
    };
    let stop = async { Stop::Interrupted(interrupts.wait().await) };
    let child = match run_child(exe, &args, place, Some(deadline), stop).await {
        Err(e) => return Replay::error(format!("{e:#}")),
        Ok(child) => child,
    };
    let valid = Validity::of_exit_code(child.code);
    let Some(results) = &child.results else {
        let note = (child.note.as_deref())
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        return Replay::error(format!(
            "no verdict (exit {}{note}); see {}",
            child.code,
            log.display()
        ));
    };
    let real_failed = crate::commands::run::child::invalid_checkers(results);
    Replay {
        valid,
        reproduced: valid == Validity::False && real_failed.iter().any(|c| failed.contains(c)),
        failed: real_failed,
        folder: child.run_dir,
        error: None,
    }
}
