//! Preflight of the whole plan, before anything is created: a run that cannot test what was
//! asked is refused with one line naming the input, the line and the fix (exit 254), instead
//! of running and passing on nothing.
//!
//! - every fault of the schedule can be injected *and undone* within `--time-limit` (else the
//!   plan would hold no fault, or never the long one);
//! - the nodes a schedule names exist in the cluster;
//! - the `--bug` values are ones the node binary knows (it is asked: `fle-node --list-bugs`).

use crate::exit::bad_input;
use crate::history::FaultKind;
use crate::nemesis::plan::{fault_window, time_limit_for};
use crate::nemesis::schedule::{FaultTemplate, Schedule, TargetSpec};
// Times in the refusals are written as the schedule writes them, so they can be pasted back.
use crate::nemesis::timed::secs;
use anyhow::Result;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// "nemesis/x.toml: line 5: " or "--nemesis kill: ".
fn at(schedule: &Schedule, fault: &FaultTemplate) -> String {
    match fault.line {
        Some(line) => format!("{}: line {line}: ", schedule.origin),
        None => format!("{}: ", schedule.origin),
    }
}

/// Checks that every fault of `schedule` fits in `time_limit` and names only `nodes`.
pub fn check_schedule(schedule: &Schedule, time_limit: Duration, nodes: &[String]) -> Result<()> {
    let window = fault_window(time_limit);
    // A timed schedule's steps come at their own times: each must be undone within the window.
    for step in schedule.timed.iter().flatten() {
        check_nodes(schedule, &step.template, nodes)?;
        let end = step.start + step.duration;
        if end > window {
            return Err(bad_input(format!(
                "{}this {} step starts at {} and lasts {}: it cannot be undone within \
                 --time-limit {} (faults get its first {}); raise --time-limit to at least {:.0}, \
                 or move the step earlier or shorten it",
                at(schedule, &step.template),
                step.template.kind.name(),
                secs(step.start),
                secs(step.duration),
                time_limit.as_secs_f64(),
                secs(window),
                time_limit_for(end).as_secs_f64().ceil(),
            )));
        }
    }
    for fault in &schedule.faults {
        check_nodes(schedule, fault, nodes)?;
        let duration = fault.duration.unwrap_or(schedule.duration);
        let need = need(schedule, fault);
        if need > window {
            let fix = match fault.line {
                Some(_) => "shorten its duration or the schedule's interval",
                None => "lower --nemesis-interval",
            };
            return Err(bad_input(format!(
                "{}this {} fault waits {} (interval) and lasts {} (duration): it cannot be \
                 injected and undone within --time-limit {} (faults get its first {}), so the run \
                 would test nothing; raise --time-limit to at least {:.0}, or {fix} (or --nemesis none: no faults)",
                at(schedule, fault),
                fault.kind.name(),
                secs(schedule.interval),
                secs(duration),
                time_limit.as_secs_f64(),
                secs(window),
                time_limit_for(need).as_secs_f64().ceil(),
            )));
        }
    }
    Ok(())
}

/// How much of the fault window one fault needs: `interval` of quiet at the earliest, then its
/// span until it is undone (composed parts count until the last is undone; random timing draws
/// around these values and the plan falls back to the shortest draw when one does not fit).
fn need(schedule: &Schedule, fault: &FaultTemplate) -> Duration {
    let duration = fault.duration.unwrap_or(schedule.duration);
    schedule.interval + fault.span(duration, schedule.duration)
}

/// The default schedule at a short --time-limit: its faults that cannot be injected and undone
/// within the fault window are left out, one line each for `left_out` (test.json), as long as
/// one fault fits. (An explicit schedule is checked whole by `check_schedule`: the user asked
/// for every fault in it. When none fits, nothing is dropped and `check_schedule` refuses.)
pub fn fit_default(schedule: &mut Schedule, time_limit: Duration) -> Vec<String> {
    let window = fault_window(time_limit);
    if schedule.faults.iter().all(|f| need(schedule, f) > window) {
        return Vec::new();
    }
    let (fits, unfit): (Vec<FaultTemplate>, Vec<FaultTemplate>) =
        std::mem::take(&mut schedule.faults)
            .into_iter()
            .partition(|f| need(schedule, f) <= window);
    schedule.faults = fits;
    unfit
        .iter()
        .map(|f| {
            let name = f.group_name().unwrap_or_else(|| f.kind.name().to_string());
            let line = f.line.map(|l| format!(" (line {l})")).unwrap_or_default();
            format!(
                "{name}{line}: does not fit --time-limit {}; it needs {:.0} or more",
                time_limit.as_secs_f64(),
                time_limit_for(need(schedule, f)).as_secs_f64().ceil(),
            )
        })
        .collect()
}

/// Refuses a reconfig fault whose target always names more voters than a minority of them
/// (`nodes` but the `observers`): the rest would be no quorum, so the servers could never be
/// added back. Targets whose size varies (a follower, the trigger) are cut at run time
/// instead (`nemesis::faults::reconfig`). A promotion of observers needs observers.
pub fn check_reconfigs(schedule: &Schedule, nodes: &[String], observers: &[String]) -> Result<()> {
    let voters = nodes.len() - observers.len();
    let most = crate::nemesis::faults::reconfig::most_out(voters);
    let templates = (schedule.timed.iter().flatten().map(|s| &s.template)).chain(&schedule.faults);
    for fault in templates {
        for part in fault
            .self_and_parts()
            .filter(|f| f.kind == FaultKind::Reconfig)
        {
            if part.promote && observers.is_empty() {
                return Err(bad_input(format!(
                    "{}reconfig role = \"participant\" promotes observers, and the ensemble has \
                     none: give the run observers (--observers 1) or drop the role",
                    at(schedule, fault),
                )));
            }
            if part.promote {
                continue; // a promotion takes no voter out
            }
            let named = match &part.target {
                TargetSpec::Nodes(n) => n.iter().filter(|n| !observers.contains(n)).count(),
                TargetSpec::All => voters,
                TargetSpec::Majority => crate::api::quorum(voters),
                TargetSpec::Followers => voters - 1,
                _ => continue,
            };
            if named > most {
                return Err(bad_input(format!(
                    "{}reconfig target \"{}\" removes {named} of the {voters} voters: the rest \
                     would be no quorum and they could never be added back; aim it at {most} or \
                     fewer (a node list, \"minority\", \"leader\", \"follower\")",
                    at(schedule, fault),
                    part.target.describe(),
                )));
            }
        }
    }
    Ok(())
}

fn check_nodes(schedule: &Schedule, fault: &FaultTemplate, nodes: &[String]) -> Result<()> {
    let listed = |spec: &TargetSpec| match spec {
        TargetSpec::Nodes(n) => n.clone(),
        _ => Vec::new(),
    };
    // The fault's own names and its composed parts' (reported at the [[fault]]'s line).
    let named: Vec<String> = (fault.self_and_parts())
        .flat_map(|f| {
            (std::iter::once(&f.target).chain(&f.watch))
                .flat_map(listed)
                .chain(f.groups.iter().flatten().flatten().cloned())
                .chain(
                    f.drops
                        .iter()
                        .flatten()
                        .flat_map(|(a, b)| std::iter::once(a.clone()).chain(b.iter().cloned())),
                )
        })
        .collect();
    match named.into_iter().find(|n| !nodes.contains(n)) {
        None => Ok(()),
        Some(stranger) => Err(bad_input(format!(
            "{}{stranger} is not in the cluster, which has {} ({} nodes): name nodes of it, or \
             raise --nodes",
            at(schedule, fault),
            span(nodes),
            nodes.len()
        ))),
    }
}

/// "n1..n3" or "n1".
fn span(nodes: &[String]) -> String {
    match (nodes.first(), nodes.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}..{b}"),
        (Some(a), _) => a.clone(),
        _ => "no nodes".into(),
    }
}

/// How long the node binary may take to list its bugs.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks every comma-separated name of `--bug` against what `binary` knows. The binary is
/// asked with `--list-bugs` (one `NAME<TAB>JIRA<TAB>FAULT<TAB>DESCRIPTION` line per bug); one
/// without that flag is asked to parse `--bug VALUE --help`, which it refuses when it does not
/// know the name.
pub fn check_bugs(binary: &Path, bug: &str) -> Result<()> {
    let wanted: Vec<&str> = bug.split(',').map(str::trim).collect();
    if let Some(empty) = wanted.iter().find(|w| w.is_empty()) {
        return Err(bad_input(format!(
            "--bug {bug:?}: an empty name{empty}; give names like quorum-minority, comma-separated"
        )));
    }
    match run(binary, &["--list-bugs"])? {
        (true, out, _) => {
            let known: Vec<&str> = out
                .lines()
                .filter_map(|l| l.split('\t').next())
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect();
            match wanted.iter().find(|w| !known.contains(w)) {
                None => Ok(()),
                Some(unknown) => Err(bad_input(format!(
                    "--bug {unknown}: {} has no such seeded bug; it knows: {} (fle-node --list-bugs)",
                    binary.display(),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ))),
            }
        }
        (false, _, _) => match run(binary, &["--bug", bug, "--help"])? {
            (true, _, _) => Ok(()),
            (false, _, err) => {
                let why = err
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("no message");
                let why = why.strip_prefix("error: ").unwrap_or(why);
                Err(bad_input(format!(
                    "--bug {bug}: {} refuses it: {why}",
                    binary.display()
                )))
            }
        },
    }
}

/// Runs `binary args` with a deadline: (succeeded, stdout, stderr).
fn run(binary: &Path, args: &[&str]) -> Result<(bool, String, String)> {
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            bad_input(format!(
                "--node-binary {}: cannot run it ({e}); give an fle-node executable",
                binary.display()
            ))
        })?;
    let started = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if started.elapsed() > ASK_TIMEOUT {
            // Our own child, by its handle.
            let _ = child.kill();
            let _ = child.wait();
            return Err(bad_input(format!(
                "--node-binary {}: `{} {}` did not answer within {} s; is it fle-node?",
                binary.display(),
                binary.display(),
                args.join(" "),
                ASK_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reconfig that would remove a quorum's worth of voters is refused in one line naming
    /// the target and the most it may name; a minority passes, observers aside.
    #[test]
    fn a_reconfig_leaving_no_quorum_is_refused_before_the_run() {
        let toml = |target: &str| {
            format!("interval = \"2s\"\nduration = \"2s\"\n[[fault]]\nkind = \"reconfig\"\ntarget = \"{target}\"\n")
        };
        let load = |target: &str| Schedule::from_toml("m", &toml(target)).unwrap();
        for target in ["n1,n2,n3", "majority", "all", "followers"] {
            let err = check_reconfigs(&load(target), &nodes(5), &[]).unwrap_err();
            let msg = format!("{err:#}");
            assert!(
                msg.contains(&format!("reconfig target \"{target}\"")),
                "{msg}"
            );
            assert!(
                msg.contains("of the 5 voters") && msg.contains("aim it at 2"),
                "{msg}"
            );
            assert!(!msg.contains('\n'), "{msg}");
        }
        for target in ["n1,n2", "minority", "leader", "follower"] {
            check_reconfigs(&load(target), &nodes(5), &[]).unwrap();
        }
        // n4 and n5 observe: three voters, of which one may leave; listing observers is free.
        let observers = ["n4".to_string(), "n5".to_string()];
        check_reconfigs(&load("n1,n4,n5"), &nodes(5), &observers).unwrap();
        check_reconfigs(&load("n1,n2"), &nodes(5), &observers).unwrap_err();
        // A promotion needs observers to promote, and takes no voter out.
        let promote = |target: &str| {
            let text = format!("{}role = \"participant\"\n", toml(target));
            Schedule::from_toml("m", &text).unwrap()
        };
        let err = format!(
            "{:#}",
            check_reconfigs(&promote("observer"), &nodes(5), &[]).unwrap_err()
        );
        assert!(
            err.contains("has none") && err.contains("--observers"),
            "{err}"
        );
        check_reconfigs(&promote("observers"), &nodes(5), &observers).unwrap();
    }

    /// The default `mixed` runs at the shortest --time-limit (10 s): the entries that cannot
    /// fit are left out and named, the rest pass the preflight; at 60 s nothing is left out.
    #[test]
    fn the_default_mixed_fits_a_short_time_limit_by_leaving_out_what_cannot() {
        let mixed = crate::nemesis::catalogue::load("mixed").unwrap();
        let mut short = mixed.clone();
        let left_out = fit_default(&mut short, Duration::from_secs(10));
        check_schedule(&short, Duration::from_secs(10), &nodes(5)).unwrap();
        assert!(!short.faults.is_empty());
        assert_eq!(short.faults.len() + left_out.len(), mixed.faults.len());
        assert!(
            left_out
                .iter()
                .all(|l| l.contains("(line ") && l.contains("--time-limit 10")),
            "{left_out:?}"
        );
        let mut long = mixed.clone();
        assert_eq!(
            fit_default(&mut long, Duration::from_secs(60)),
            Vec::<String>::new()
        );
        assert_eq!(long.faults.len(), mixed.faults.len());
        // Nothing fits: nothing is dropped, and the preflight's refusal stands.
        let mut tiny = mixed.clone();
        assert!(fit_default(&mut tiny, Duration::from_secs(3)).is_empty());
        assert!(check_schedule(&tiny, Duration::from_secs(3), &nodes(5)).is_err());
    }

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn toml(text: &str) -> Schedule {
        let mut s = Schedule::from_toml("t", text).unwrap();
        s.origin = "t.toml".into();
        s
    }

    #[test]
    fn a_fault_longer_than_the_run_is_refused_naming_its_line() {
        let s = toml("interval = \"2s\"\n\n[[fault]]\nkind = \"kill\"\nduration = \"120s\"\n");
        let err = check_schedule(&s, Duration::from_secs(10), &nodes(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.toml: line 3: ") && err.contains("120s") && err.contains("123"),
            "{err}"
        );
        // The same fault fits a long enough run.
        check_schedule(&s, Duration::from_secs(123), &nodes(3)).unwrap();
        check_schedule(&s, Duration::from_secs(122), &nodes(3)).unwrap_err();
    }

    #[test]
    fn the_built_in_pause_leader_does_not_fit_eight_seconds() {
        let s = crate::nemesis::catalogue::load("pause-leader").unwrap();
        let err = check_schedule(&s, Duration::from_secs(8), &nodes(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nemesis/pause-leader.toml: line 7") && err.contains("--time-limit 8"),
            "{err}"
        );
        assert!(err.contains("at least 12"), "{err}");
        // 5 s + 6 s: 12 s leave the 11 s it needs, 11 s leave 10 s.
        check_schedule(&s, Duration::from_secs(12), &nodes(3)).unwrap();
        check_schedule(&s, Duration::from_secs(11), &nodes(3)).unwrap_err();
    }

    #[test]
    fn flags_name_the_interval_flag() {
        let s =
            Schedule::from_flags("kill", Duration::from_secs(10), Duration::from_secs(10)).unwrap();
        let err = check_schedule(&s, Duration::from_secs(10), &nodes(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--nemesis kill: ") && err.contains("--nemesis-interval"),
            "{err}"
        );
        check_schedule(&s, Duration::from_secs(21), &nodes(3)).unwrap();
    }

    #[test]
    fn nodes_outside_the_cluster_are_refused() {
        // The one-line refusal of `text` on 3 nodes.
        let refusal = |text: &str| {
            check_schedule(&toml(text), Duration::from_secs(60), &nodes(3))
                .unwrap_err()
                .to_string()
        };
        let named = "[[fault]]\nkind = \"kill\"\ntarget = \"n9\"\n";
        let err = refusal(named);
        assert!(
            err.starts_with("t.toml: line 1: n9 is not in the cluster") && err.contains("n1..n3"),
            "{err}"
        );
        check_schedule(&toml(named), Duration::from_secs(60), &nodes(9)).unwrap();
        for (text, want) in [
            (
                "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\ngroups = [[\"n1\"], [\"n4\"]]\n",
                "n4 is not in the cluster",
            ),
            (
                "[[fault]]\nkind = \"kill\"\nwhen = \"election\"\nwatch = \"n1,n7\"\n",
                "n7 is not in the cluster",
            ),
            (
                "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\ntarget = \"n5\"\n",
                "line 1: n5 is not in the cluster",
            ),
            (
                "[[step]]\nat = \"1s\"\nkind = \"partition\"\ndrops = { n2 = [\"n6\"] }\nduration = \"1s\"\n",
                "n6 is not in the cluster",
            ),
        ] {
            let err = refusal(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn every_built_in_schedule_fits_the_default_run() {
        for (name, _) in crate::nemesis::catalogue::BUILT_IN {
            let s = crate::nemesis::catalogue::load(name).unwrap();
            check_schedule(&s, Duration::from_secs(60), &nodes(5))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
