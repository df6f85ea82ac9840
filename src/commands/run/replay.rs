//! A run that replays: every run ends by writing the faults it applied as a timed schedule
//! (`schedule.toml`, the `[[step]]` format of `nemesis::timed`, read off its history), and
//! `fle-chaos test --replay RUN_DIR` runs the same test again: every setting of the run's
//! test.json and that schedule, so the same faults hit the same nodes at the same times.
//!
//! Why not the seed alone: the default nemesis is steered (it chooses each fault from what the
//! cluster did so far) and triggered faults wait for what the cluster shows, so the same seed
//! deals the same faults only to a cluster that behaves the same. The recorded schedule says
//! what did happen; the seed still drives the workload's choices.

use super::plan::TestArgs;
use crate::exit::bad_input;
use crate::history::test_info::TestInfo;
use crate::nemesis::timed;
use crate::store::{RunDir, SCHEDULE};
use anyhow::Result;
use std::path::PathBuf;

/// The flags (clap ids) a replay takes from the run's test.json: given beside `--replay`,
/// they are refused, not silently overridden.
pub const FIXED_BY_THE_RUN: [&str; 31] = [
    "nodes",
    "observers",
    "time_limit",
    "workload",
    "nemesis",
    "nemesis_interval",
    "nemesis_strategy",
    "met_before",
    "seed",
    "concurrency",
    "rate",
    "net",
    "target",
    "zookeeper_home",
    "zookeeper_version",
    "zookeeper_config",
    "tick_ms",
    "init_limit",
    "sync_limit",
    "recovery_timeout",
    "faketime",
    "bug",
    "finalize_wait_ms",
    "ssh",
    "nodes_file",
    "ssh_user",
    "ssh_private_key",
    "ssh_port",
    "ssh_strict_host_key_checking",
    "ssh_config",
    "real_clock_skew",
];

/// The command line that replays the run in `run_dir`.
pub fn command(run_dir: &RunDir) -> String {
    format!("fle-chaos test --replay {run_dir}")
}

/// Writes the run's schedule.toml: the faults the run applied, as it applied them (each fault
/// interval of its history, `timed::of_run`), with the replay command on top. A run that
/// applied no fault gets a file of comments only, which a replay reads as `--nemesis none`.
pub fn write_schedule(run_dir: &RunDir) -> Result<()> {
    let recorded = timed::of_run(run_dir.path())?;
    let mut header = format!(
        "the faults this run applied, as it applied them (seed {})\n{}",
        recorded.info.seed,
        command(run_dir)
    );
    if recorded.steps.is_empty() {
        header.push_str("\nno fault was applied: a replay runs with --nemesis none");
    }
    run_dir.save_schedule(&timed::to_toml(
        &recorded.steps,
        &header,
        recorded.fake_monotonic,
    ))
}

/// The arguments of `fle-chaos test`: as given, or for `--replay RUN_DIR` the run's own (its
/// test.json `settings.args` and seed) under its recorded schedule, with only what the command
/// line may change taken from it (where runs go, how many, which node binary, another timed
/// schedule).
pub fn resolve(given: TestArgs) -> Result<TestArgs> {
    let Some(dir) = given.replay.clone() else {
        return Ok(given);
    };
    let (run_dir, info) = RunDir::open(&dir)
        .and_then(|d| Ok((d.clone(), d.info()?)))
        .map_err(|e| {
            bad_input(format!(
                "--replay {}: not a run folder of fle-chaos test ({e:#}); give a run folder \
                 such as reports/latest",
                dir.display()
            ))
        })?;
    let mut args = recorded_args(&run_dir, &info)?;
    args.seed = Some(info.seed);
    args.met_before = None;
    args.nemesis_interval = None;
    args.test_count = given.test_count;
    args.out = given.out;
    args.name = given.name.or(Some(info.name));
    args.leave_running = given.leave_running;
    if given.node_binary.is_some() {
        args.node_binary = given.node_binary;
    }
    let schedule = match given.nemesis_file {
        Some(file) => Some(file),
        None => recorded_schedule(&run_dir)?,
    };
    args.nemesis = schedule.is_none().then(|| "none".to_string());
    args.nemesis_file = schedule;
    args.replay = Some(dir.canonicalize().unwrap_or(dir));
    Ok(args)
}

/// The run's `schedule.toml`, or None when it applied no fault.
fn recorded_schedule(dir: &RunDir) -> Result<Option<PathBuf>> {
    let path = dir.schedule();
    let text = std::fs::read_to_string(&path).map_err(|e| {
        bad_input(format!(
            "--replay {dir}: cannot read its {SCHEDULE} ({e}): a run that did not finish, or \
             one made before runs recorded it; `fle-chaos shrink {dir} --schedule-only` writes its \
             faults to shrink/replay.toml, to replay with --nemesis-file"
        ))
    })?;
    Ok(timed::is_timed(&text).then_some(path))
}

/// The test arguments the run was made with (test.json's `settings.args`), as this version
/// reads them.
pub fn recorded_args(run_dir: &RunDir, info: &TestInfo) -> Result<TestArgs> {
    (info.settings.test.args.as_ref())
        .ok_or_else(|| anyhow::anyhow!("no settings.args"))
        .and_then(|a| Ok(serde_json::from_value(serde_json::to_value(a)?)?))
        .map_err(|e| {
            bad_input(format!(
                "{run_dir}: test.json does not hold this version's test arguments ({e}); replay \
                 it with the fle-chaos that made it"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run folder whose test.json holds `args` (as a run writes them) and `schedule`.
    fn run_folder(args: serde_json::Value, schedule: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut info = serde_json::to_value(TestInfo::for_tests(&["n1", "n2", "n3"])).unwrap();
        info["seed"] = 77.into();
        info["settings"] = serde_json::json!({ "args": args });
        std::fs::write(dir.path().join("test.json"), info.to_string()).unwrap();
        if let Some(text) = schedule {
            std::fs::write(dir.path().join(SCHEDULE), text).unwrap();
        }
        dir
    }

    fn parse(words: &[&str]) -> Result<TestArgs, String> {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        TestArgs::from_words(&words)
    }

    const STEP: &str =
        "# x\n[[step]]\nat = \"2s\"\nkind = \"kill\"\ntarget = \"n2\"\nduration = \"1s\"\n";

    #[test]
    fn a_replay_takes_the_runs_settings_seed_and_schedule() {
        let original = parse(&[
            "--nodes",
            "3",
            "--time-limit",
            "20",
            "--bug",
            "quorum-minority",
            "--tick-ms",
            "100",
        ])
        .unwrap();
        let dir = run_folder(serde_json::to_value(&original).unwrap(), Some(STEP));
        let d = dir.path().to_str().unwrap();
        let args =
            resolve(parse(&["--replay", d, "--out", "/tmp/r", "--test-count", "3"]).unwrap())
                .unwrap();
        assert_eq!(args.seed, Some(77));
        assert_eq!((args.time_limit, args.tick_ms), (20.0, 100));
        assert_eq!(args.bug.as_deref(), Some("quorum-minority"));
        assert_eq!(args.nemesis_file, Some(dir.path().join(SCHEDULE)));
        assert_eq!(args.nemesis, None);
        assert_eq!((args.out.to_str(), args.test_count), (Some("/tmp/r"), 3));
        assert_eq!(args.name.as_deref(), Some("t"));
        // Replayed again, the replay's own args lead to the same settings.
        let again = run_folder(serde_json::to_value(&args).unwrap(), Some(STEP));
        let a = again.path().to_str().unwrap();
        let twice = resolve(parse(&["--replay", a]).unwrap()).unwrap();
        assert_eq!((twice.time_limit, twice.bug), (20.0, args.bug.clone()));
        assert_eq!(twice.nemesis_file, Some(again.path().join(SCHEDULE)));
    }

    #[test]
    fn a_run_without_faults_replays_with_none_and_another_schedule_may_be_given() {
        let original = parse(&["--nodes", "3"]).unwrap();
        let value = serde_json::to_value(&original).unwrap();
        let dir = run_folder(value.clone(), Some("# no fault was applied\n"));
        let d = dir.path().to_str().unwrap();
        let args = resolve(parse(&["--replay", d]).unwrap()).unwrap();
        assert_eq!(
            (args.nemesis.as_deref(), args.nemesis_file),
            (Some("none"), None)
        );
        let args =
            resolve(parse(&["--replay", d, "--nemesis-file", "/x/minimal.toml"]).unwrap()).unwrap();
        assert_eq!(args.nemesis_file, Some(PathBuf::from("/x/minimal.toml")));
        assert_eq!(args.nemesis, None);
    }

    #[test]
    fn what_the_run_fixed_is_refused_beside_replay_and_bad_folders_are_one_line() {
        for flag in [
            ["--seed", "3"],
            ["--nodes", "3"],
            ["--workload", "election"],
        ] {
            let e = parse(&["--replay", "/x", flag[0], flag[1]]).unwrap_err();
            assert!(e.contains("cannot be used with"), "{flag:?}: {e}");
        }
        let e = resolve(parse(&["--replay", "/nonexistent/run"]).unwrap()).unwrap_err();
        let line = format!("{e:#}");
        assert!(
            line.starts_with("--replay /nonexistent/run: not a run folder"),
            "{line}"
        );
        assert_eq!(crate::exit::code_for(&e), 254);
        let original = serde_json::to_value(parse(&[]).unwrap()).unwrap();
        let dir = run_folder(original, None);
        let e = resolve(parse(&["--replay", dir.path().to_str().unwrap()]).unwrap()).unwrap_err();
        assert!(format!("{e:#}").contains("--schedule-only"), "{e:#}");
    }
}
