//! The shrink's report: `shrink.json` (the typed [`ShrinkOutcome`], for a sweep's summary) and
//! `report.md` (original vs minimal, the reproduction rate, the replay command, every replay).

use super::search::relative;
use super::{ShrinkOutcome, Status};
use anyhow::{Context, Result};

/// Writes `shrink.json` and `report.md` into the outcome's folder.
pub fn write(o: &ShrinkOutcome) -> Result<()> {
    let json = o.out.join("shrink.json");
    std::fs::write(&json, serde_json::to_string_pretty(o)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let md = o.out.join("report.md");
    std::fs::write(&md, markdown(o)).with_context(|| format!("cannot write {}", md.display()))
}

/// The few lines printed when the command ends.
pub fn summary(o: &ShrinkOutcome) -> String {
    let mut s = String::new();
    match o.status {
        Status::ScheduleOnly => s.push_str(&format!(
            "fle-chaos: the run's {} faults as a timed schedule: {}\nfle-chaos: replay: {}\n",
            o.original.faults,
            o.replay_file.display(),
            o.replay_command
        )),
        Status::NotReproduced => s.push_str(&format!(
            "fle-chaos: the recorded faults did not reproduce the failure ({}) in {} replays; \
             see {}\n",
            o.target.join(", "),
            o.runs.len(),
            o.out.join("report.md").display()
        )),
        Status::Shrunk | Status::Interrupted => {
            if let Some(sig) = &o.interrupted {
                s.push_str(&format!(
                    "fle-chaos: interrupted by {sig}: the smallest failing sequence so far\n"
                ));
            }
            s.push_str(&format!(
                "fle-chaos: shrunk {} faults ({:.1} s run) to {} ({:.1} s run); {} of {} final replays reproduce {}\n",
                o.original.faults,
                o.original.time_limit_s,
                o.minimal.faults,
                o.minimal.time_limit_s,
                o.reproduced,
                o.final_replays,
                o.target.join(", ")
            ));
            for step in &o.minimal.steps {
                s.push_str(&format!("fle-chaos:   {step}\n"));
            }
            s.push_str(&format!("fle-chaos: replay: {}\n", o.replay_command));
            s.push_str(&format!(
                "fle-chaos: report: {}\n",
                o.out.join("report.md").display()
            ));
        }
    }
    s
}

fn markdown(o: &ShrinkOutcome) -> String {
    let mut s = format!("# Shrink of {}\n\n", o.run_dir.display());
    s.push_str(&format!(
        "Failure to reproduce: {} invalid. Status: {:?}.\n\n",
        o.target.join(", "),
        o.status
    ));
    s.push_str("| | faults | run (s) | fault time (s) |\n|---|---|---|---|\n");
    for (name, q) in [("original", &o.original), ("minimal", &o.minimal)] {
        s.push_str(&format!(
            "| {name} | {} | {:.1} | {:.1} |\n",
            q.faults, q.time_limit_s, q.fault_s
        ));
    }
    if o.final_replays > 0 {
        s.push_str(&format!(
            "\nReproduction rate of the minimal sequence: {} of {} final replays ({:.0}%).\n",
            o.reproduced,
            o.final_replays,
            100.0 * o.rate()
        ));
    }
    for a in &o.set_aside {
        s.push_str(&format!(
            "\nSet aside (below --min-rate, the search went on without it): {a}.\n"
        ));
    }
    s.push_str("\n## Minimal sequence\n\n");
    if o.minimal.steps.is_empty() {
        s.push_str("No fault: the failure shows without any.\n");
    }
    for step in &o.minimal.steps {
        s.push_str(&format!("- {step}\n"));
    }
    s.push_str(&format!("\nReplay:\n\n    {}\n", o.replay_command));
    s.push_str("\n## Original sequence (replay.toml)\n\n");
    for step in &o.original.steps {
        s.push_str(&format!("- {step}\n"));
    }
    s.push_str(&format!(
        "\n## Search\n\n{} candidates, {} replays, {:.0} s (budget {:.0} s{}).\n\n",
        o.candidates,
        o.runs.len(),
        o.elapsed_s,
        o.budget_s,
        if o.budget_exhausted {
            ", exhausted: the search stopped early"
        } else {
            ""
        }
    ));
    if !o.runs.is_empty() {
        s.push_str("| candidate | faults | run (s) | exit | reproduced | invalid | took (s) | folder |\n|---|---|---|---|---|---|---|---|\n");
        for r in &o.runs {
            s.push_str(&format!(
                "| c{} | {} | {:.1} | {}{} | {} | {} | {:.1} | {} |\n",
                r.candidate,
                r.faults,
                r.time_limit_s,
                r.code,
                if r.cancelled { " (stopped)" } else { "" },
                if r.reproduced { "yes" } else { "no" },
                r.invalid.join(", "),
                r.took_s,
                r.run_dir
                    .as_deref()
                    .map(|d| relative(d, &o.out))
                    .unwrap_or_default()
            ));
        }
    }
    s
}
