//! The timed schedule: a nemesis file of `[[step]]` tables, each one fault at a given time since
//! the workload started, on resolved nodes (never roles), for a given duration:
//!
//! ```toml
//! [[step]]
//! at = "3.2s"
//! kind = "partition"
//! groups = [["n1", "n2"], ["n3"]]
//! duration = "5s"
//! ```
//!
//! Why: a seeded `[[fault]]` schedule says what *may* happen and resolves "the leader" at run
//! time; a replay of a recorded run (and shrinking it, `crate::commands::shrink`) needs what *did*
//! happen, exactly, on the same nodes. A step takes the keys of a `[[fault]]` (validated by the
//! same code) plus `at` and, for partitions no named shape can say (one-way cuts, rings,
//! bridges), `drops`: the exact grudge; a packet step names its directed `links`. Steps run in
//! order of `at` through the same nemesis as a seeded plan (`plan::plan` hands them out as
//! written); steps that overlap run together, as one composed fault ([`compose_overlapping`]).
//!
//! [`of_run`] makes the steps of a recorded run from its history's fault intervals
//! (`history::view`, the one definition of when a fault was in force); [`to_toml`] writes them.

use super::faults::{self, RecordedStart, StepKeys};
use super::raw_fault::RawFault;
use super::schedule::{ClockMode, FaultTemplate, Grudge, PlannedFault, Schedule, TargetSpec};
use super::units::{line_of, parse_duration, table_line, toml_error};
use crate::exit::bad_input;
use crate::history::line::Body;
use crate::history::read::{self, BadLine};
use crate::history::test_info::TestInfo;
use crate::history::{sid_of, EventType, FaultStep, FaultValue, NEMESIS};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// True when `text` is a timed schedule (it has `[[step]]` tables). Text that is not TOML is
/// left to the seeded schedule's parser, which names the line.
pub fn is_timed(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("step"))
}

/// Parses a timed schedule; the error is "line N: what is wrong".
pub fn from_toml(name: &str, text: &str) -> Result<Schedule, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let mut fake_monotonic = false;
    let mut steps = Vec::new();
    for (key, value) in &table {
        let line = line_of(text, key);
        match key.as_str() {
            "step" => {
                let Some(list) = value.as_array() else {
                    return Err(format!("line {line}: step must be [[step]] tables"));
                };
                for (i, step) in list.iter().enumerate() {
                    let line = table_line(text, "[[step]]", i);
                    let Some(step) = step.as_table() else {
                        return Err(format!("line {line}: step must be [[step]] tables"));
                    };
                    let fault = parse_step(step, i)
                        .map_err(|e| format!("line {line}: in this [[step]]: {e}"))?;
                    steps.push(fault_at_line(fault, line));
                }
            }
            "fake_monotonic" => {
                fake_monotonic = value
                    .as_bool()
                    .ok_or_else(|| format!("line {line}: fake_monotonic must be true or false"))?
            }
            "fault" => {
                return Err(format!(
                    "line {line}: [[fault]] and [[step]] in one file: a schedule is either seeded \
                     ([[fault]] tables with interval) or timed ([[step]] tables with at); split it"
                ))
            }
            "interval" | "duration" => {
                return Err(format!(
                    "line {line}: {key} is for [[fault]] schedules; in a timed schedule each \
                     [[step]] has its own at and duration"
                ))
            }
            other => {
                return Err(format!(
                    "line {line}: unknown key {other}; a timed schedule has [[step]] tables and \
                     optionally fake_monotonic"
                ))
            }
        }
    }
    if steps.is_empty() {
        return Err("no [[step]] tables: add at least one, e.g.\n[[step]]\nat = \"3s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"4s\"".into());
    }
    steps.sort_by_key(|s| s.start);
    Ok(Schedule {
        name: name.to_string(),
        origin: name.to_string(),
        interval: Duration::ZERO,
        duration: Duration::ZERO,
        faults: steps.iter().map(|s| s.template.clone()).collect(),
        fake_monotonic,
        timing: super::timing::Timing::Fixed,
        timed: Some(steps),
        zookeeper_config: Vec::new(),
    })
}

fn fault_at_line(mut f: PlannedFault, line: usize) -> PlannedFault {
    f.template.line = Some(line);
    f
}

/// Steps in force at the same time, as one composed fault: the first of each overlapping run
/// of steps is the main fault, the steps that start before everything before them is undone
/// are its parts (their `start` counted from the main's). A recorded run's faults overlap
/// where a composition or a steered goal put them together; replayed one after another, each
/// would wait for the one before to be undone and the replay would be another run.
pub fn compose_overlapping(steps: Vec<PlannedFault>) -> Vec<PlannedFault> {
    let mut out: Vec<PlannedFault> = Vec::new();
    for step in steps {
        match out.last_mut() {
            Some(main) if step.start < main.start + main.span() => {
                let mut part = step;
                part.start -= main.start;
                main.parts.push(part);
            }
            _ => out.push(step),
        }
    }
    out
}

/// The random word of step `i` (the tear point of a power loss, the damage of a corrupt):
/// fixed by the step's place, so a replay of the same file does the same.
fn step_pick(i: usize) -> u64 {
    0x5eed_0000_u64
        .wrapping_add(i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// One `[[step]]` table: `at`, `drops` and `duration` here, the rest by `[[fault]]`'s code.
fn parse_step(step: &toml::Table, i: usize) -> Result<PlannedFault, String> {
    let mut rest = step.clone();
    let text = |key: &str, rest: &mut toml::Table| -> Result<Option<String>, String> {
        match rest.remove(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("{key} = {v}: must be a string like \"3.2s\"")),
        }
    };
    let at = text("at", &mut rest)?.ok_or(
        "at is missing: when the step starts after the workload started, e.g. at = \"3.2s\"",
    )?;
    let at = parse_duration(&at).map_err(|e| format!("at: {e}"))?;
    let duration = text("duration", &mut rest)?
        .ok_or("duration is missing: how long the fault lasts, e.g. duration = \"5s\"")?;
    let duration = parse_duration(&duration).map_err(|e| format!("duration: {e}"))?;
    if rest.contains_key("weight") {
        return Err("weight is for [[fault]] tables; a step happens exactly once".into());
    }
    if rest.contains_key("quiet_after") {
        return Err("quiet_after is for [[fault]] tables; a step starts at its `at`".into());
    }
    let mut exact = StepKeys {
        target_given: rest.contains_key("target"),
        shape_given: rest.contains_key("shape"),
        ..StepKeys::default()
    };
    if let Some(v) = rest.remove("drops") {
        exact.drops = Some(parse_drops(&v)?);
    }
    if let Some(v) = rest.remove("links") {
        exact.links = Some(parse_links(&v)?);
    }
    // groups alone means shape "groups", as the recorded replays write it.
    if rest.contains_key("groups") && !rest.contains_key("shape") {
        rest.insert("shape".into(), toml::Value::String("groups".into()));
    }
    let raw: RawFault = toml::Value::Table(rest)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().trim().to_string())?;
    let mut t: FaultTemplate = raw.into_template()?;
    t.duration = Some(duration);
    let fault = faults::of(t.kind);
    let given = [
        ("drops", exact.drops.is_some()),
        ("links", exact.links.is_some()),
    ];
    if let Some((key, _)) = (given.iter()).find(|(k, set)| *set && !fault.keys().contains(k)) {
        return Err(faults::only_for(key));
    }
    fault.exact_step(&mut t, &exact)?;
    Ok(planned_step(i, at, duration, t))
}

/// Step `i`: `template` at `start` for `duration`, its random word fixed by its place and a
/// clock bump's delta as written (a step never draws a sign).
fn planned_step(
    i: usize,
    start: Duration,
    duration: Duration,
    template: FaultTemplate,
) -> PlannedFault {
    let clock_delta_ms = match template.clock {
        Some(ClockMode::Bump { delta_ms, .. }) => Some(delta_ms),
        _ => None,
    };
    PlannedFault {
        start,
        duration,
        template,
        pick: step_pick(i),
        clock_delta_ms,
        gap: Duration::ZERO,
        quiet: Duration::ZERO,
        parts: Vec::new(),
        annotations: Default::default(),
    }
}

/// `drops = { n1 = ["n3"], n3 = ["n1", "n2"] }`.
fn parse_drops(v: &toml::Value) -> Result<Grudge, String> {
    let usage = "drops must be a table of node = [nodes it drops], e.g. drops = { n1 = [\"n3\"] }";
    let table = v.as_table().ok_or(usage)?;
    let mut g = Grudge::new();
    for (node, from) in table {
        let from = from.as_array().ok_or(usage)?;
        let mut set = std::collections::BTreeSet::new();
        for f in from {
            let f = f.as_str().ok_or(usage)?;
            for name in [node.as_str(), f] {
                if sid_of(name).is_none() {
                    return Err(format!("drops: '{name}' is not a node name like n1"));
                }
            }
            if f == node {
                return Err(format!("drops: {node} cannot drop itself"));
            }
            set.insert(f.to_string());
        }
        if !set.is_empty() {
            g.insert(node.clone(), set);
        }
    }
    if g.is_empty() {
        return Err("drops cuts nothing: name at least one node and whom it drops".into());
    }
    Ok(g)
}

/// `links = [["n1", "n2"], ["n3", "n2"]]`: a packet step's directed links, `[from, to]`, as the
/// history records them; kept as a grudge (to -> the nodes whose packets to it are hit), the
/// form `faults::packet::links` takes.
fn parse_links(v: &toml::Value) -> Result<Grudge, String> {
    let usage = "links must be a list of [from, to] pairs, e.g. links = [[\"n1\", \"n2\"]]";
    let pairs = v.as_array().ok_or(usage)?;
    let mut g = Grudge::new();
    for pair in pairs {
        let ends: Vec<&str> = pair
            .as_array()
            .ok_or(usage)?
            .iter()
            .map(|n| n.as_str().ok_or(usage))
            .collect::<Result<_, _>>()?;
        let [from, to] = ends[..] else {
            return Err(usage.into());
        };
        for name in [from, to] {
            if sid_of(name).is_none() {
                return Err(format!("links: '{name}' is not a node name like n1"));
            }
        }
        if from == to {
            return Err(format!(
                "links: {from} -> {to} is not a link between two nodes"
            ));
        }
        g.entry(to.to_string())
            .or_default()
            .insert(from.to_string());
    }
    if g.is_empty() {
        return Err("links hits nothing: name at least one [from, to] pair".into());
    }
    Ok(g)
}

/// A duration as a step writes it: "4s", "4.138s".
pub fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    }
}

/// Writes `steps` as a timed schedule, each line of `header` as a comment on top.
pub fn to_toml(steps: &[PlannedFault], header: &str, fake_monotonic: bool) -> String {
    let mut out = String::new();
    for line in header.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    if fake_monotonic {
        out.push_str("fake_monotonic = true\n");
    }
    for s in steps {
        let t = &s.template;
        out.push_str(&format!(
            "\n[[step]]\nat = \"{}\"\nkind = \"{}\"\n",
            secs(s.start),
            t.kind.name()
        ));
        out.push_str(&faults::of(t.kind).step_lines(s));
        out.push_str(&format!("duration = \"{}\"\n", secs(s.duration)));
    }
    out
}

/// What a recorded run did: its settings and its faults as timed steps.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub info: TestInfo,
    pub steps: Vec<PlannedFault>,
    /// The run's schedule asked libfaketime to fake monotonic clocks too.
    pub fake_monotonic: bool,
}

/// The faults of the run in `run_dir`, as it did them: each fault interval of its history
/// (`history::view`) with its resolved nodes, what the start event says was done (the exact
/// grudge, the clock offset), its time since the workload started and how long it was in
/// force. Faults that failed (nothing done) are not steps.
#[allow(
    clippy::too_many_lines,
    reason = "one pass over the history pairing each fault start with its undo; its steps share the pass's state"
)]
pub fn of_run(run_dir: &Path) -> Result<Recorded> {
    let info = TestInfo::read(&run_dir.join(TestInfo::FILE)).map_err(|e| {
        bad_input(format!(
            "{}: not a run folder of fle-chaos test (its test.json: {e:#}); give a run folder such as reports/election/latest",
            run_dir.display()
        ))
    })?;
    let mut view = info.view();
    // Each done start: its typed value and its line, for what its kind recorded beyond it.
    let mut starts: BTreeMap<u64, (FaultValue, String)> = BTreeMap::new();
    let mut first_ns: Option<u64> = None;
    let history = crate::history::file::in_run(run_dir);
    read::for_each(&history, |at, line, _| {
        let e = view.of_line(at.pos, line);
        view.feed(e);
        first_ns.get_or_insert(line.time);
        if let Body::Fault(v) = &line.body {
            let done = line.kind == EventType::Info && line.process == NEMESIS;
            if done && matches!(v.step(line.f), Some(FaultStep::Starts(_))) {
                starts.insert(line.index, (v.clone(), line.text.to_string()));
            }
        }
    })
    .map_err(|e| match e.downcast_ref::<BadLine>() {
        Some(bad) => bad_input(bad.to_string()),
        None => bad_input(format!("{}: {e:#}", history.display())),
    })?;
    let done = view.finish();
    // The workload's start, on the history's clock: a fault started `at_ms` after it, never
    // before (the nemesis is late, never early). Runs older than `at_ms`: the first event.
    let anchor = done
        .intervals
        .iter()
        .filter_map(|i| {
            let at = starts.get(&i.start_index)?.0.at_ms?;
            Some(i.start_ns.saturating_sub(at * 1_000_000))
        })
        .min()
        .or(first_ns)
        .unwrap_or(0);
    let mut steps = Vec::new();
    for (i, interval) in done.intervals.iter().enumerate() {
        let (value, text) = starts
            .get(&interval.start_index)
            .cloned()
            .unwrap_or_default();
        let end = interval.end_ns.unwrap_or(done.end_ns);
        let t = FaultTemplate {
            target: TargetSpec::Nodes(interval.nodes.clone()),
            ..super::schedule::default_template(interval.kind)
        };
        let start = RecordedStart {
            value: &value,
            line: &text,
            nodes: &info.nodes,
        };
        let replayed = faults::of(interval.kind).replayed(t, &start);
        let mut t = match replayed {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(why) => {
                return Err(bad_input(format!(
                    "{}: its {} fault (history index {}) {why}; shrink a run whose history is as \
                     fle-chaos wrote it",
                    run_dir.display(),
                    interval.kind.name(),
                    interval.start_index
                )))
            }
        };
        // As long as the nemesis held it: the planned duration, unless the run's stop cut it
        // short (the final heal ended it); the time between the done start and the done undo
        // would add the undo's own time at every generation of replays.
        let held = Duration::from_nanos(end.saturating_sub(interval.start_ns));
        let cut_short = done.final_heal.is_some_and(|h| end >= h.time);
        let duration = match value.duration_ms {
            Some(ms) if !cut_short => Duration::from_millis(ms),
            _ => held,
        };
        t.duration = Some(duration);
        // Whole milliseconds, as the file writes them.
        let start = Duration::from_millis(interval.start_ns.saturating_sub(anchor) / 1_000_000);
        let held_ms = Duration::from_millis(duration.as_millis() as u64);
        steps.push(planned_step(i, start, held_ms, t));
    }
    let fake_monotonic = info.fake_monotonic();
    Ok(Recorded {
        info,
        steps,
        fake_monotonic,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::schedule::{FaultKind, FrameMode, PacketMode};

    const FILE: &str = r#"# a replay
[[step]]
at = "9s"
kind = "kill"
target = "n3"
duration = "4s"

[[step]]
at = "3.2s"
kind = "partition"
groups = [["n1", "n2"], ["n3"]]
duration = "5s"

[[step]]
at = "20s"
kind = "partition"
drops = { n2 = ["n1"], n3 = ["n1"] }
duration = "1.5s"

[[step]]
at = "25s"
kind = "clock"
target = "n1,n2"
mode = "bump"
delta = "-60s"
duration = "2s"

[[step]]
at = "30s"
kind = "packet"
links = [["n1", "n2"], ["n3", "n2"], ["n1", "n3"]]
mode = "delay"
delay = "80ms"
jitter = "20ms"
duration = "3s"

[[step]]
at = "34s"
kind = "packet"
target = "n2"
mode = "bandwidth"
rate = "2mbit"
duration = "1s"
"#;

    #[test]
    fn steps_parse_in_time_order_with_their_lines() {
        let s = Schedule::from_toml("t", FILE).unwrap();
        let steps = s.timed.as_ref().unwrap();
        let at: Vec<u128> = steps.iter().map(|f| f.start.as_millis()).collect();
        assert_eq!(at, vec![3200, 9000, 20_000, 25_000, 30_000, 34_000]);
        assert_eq!(steps[0].template.line, Some(8));
        assert_eq!(
            steps[0].template.groups,
            Some(vec![vec!["n1".into(), "n2".into()], vec!["n3".into()]])
        );
        assert_eq!(
            steps[1].template.target,
            TargetSpec::Nodes(vec!["n3".into()])
        );
        assert_eq!(steps[2].template.drops.as_ref().unwrap().len(), 2);
        assert_eq!(steps[3].clock_delta_ms, Some(-60_000));
        // Links are kept as whose packets each node's side of a link gets (to <- from).
        let links = steps[4].template.drops.as_ref().unwrap();
        let links: Vec<(&str, Vec<&str>)> = links
            .iter()
            .map(|(to, from)| (to.as_str(), from.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(links, vec![("n2", vec!["n1", "n3"]), ("n3", vec!["n1"])]);
        assert_eq!(
            steps[4].template.target,
            TargetSpec::Nodes(vec!["n1".into(), "n2".into(), "n3".into()])
        );
        assert_eq!(
            steps[4].template.packet,
            Some(PacketMode::Delay {
                delay_ms: 80,
                jitter_ms: 20
            })
        );
        assert_eq!(
            steps[5].template.packet,
            Some(PacketMode::Bandwidth { rate_kbit: 2000 })
        );
        assert_eq!(
            s.kinds(),
            vec![
                FaultKind::Partition,
                FaultKind::Kill,
                FaultKind::Clock,
                FaultKind::Packet
            ]
        );
        // The plan is the steps, as written, seed or not.
        let p = super::super::plan::plan(&s, 1, Duration::from_secs(60));
        assert_eq!(p, *steps);
        assert_eq!(
            super::super::plan::plan(&s, 2, Duration::from_secs(21)).len(),
            2
        );
    }

    #[test]
    fn written_steps_read_back_the_same() {
        let s = Schedule::from_toml("t", FILE).unwrap();
        let steps = s.timed.unwrap();
        let text = to_toml(&steps, "replay of x\nsecond line", false);
        assert!(text.starts_with("# replay of x\n# second line\n"), "{text}");
        let again = Schedule::from_toml("t", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let again = again.timed.unwrap();
        for (a, b) in steps.iter().zip(&again) {
            assert_eq!(
                (a.start, a.duration, a.clock_delta_ms, &a.template.drops),
                (b.start, b.duration, b.clock_delta_ms, &b.template.drops)
            );
            assert_eq!(
                (&a.template.target, &a.template.groups, a.template.clock),
                (&b.template.target, &b.template.groups, b.template.clock)
            );
            assert_eq!(a.template.packet, b.template.packet);
        }
        assert_eq!(again.len(), steps.len());
    }

    #[test]
    fn reconfig_steps_keep_their_roles_and_replacement() {
        let file = "[[step]]\nat = \"2s\"\nkind = \"reconfig\"\ntarget = \"n2\"\nrole = \"observer\"\n\
                    duration = \"3s\"\n\n[[step]]\nat = \"9s\"\nkind = \"reconfig\"\ntarget = \"n3\"\n\
                    replace = true\nduration = \"3s\"\n\n[[step]]\nat = \"15s\"\nkind = \"reconfig\"\n\
                    target = \"n4\"\nrole = \"participant\"\nduration = \"3s\"\n";
        let steps = Schedule::from_toml("t", file).unwrap().timed.unwrap();
        let text = to_toml(&steps, "replay", false);
        let again = Schedule::from_toml("t", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let kept = |s: &[PlannedFault]| -> Vec<(bool, bool, bool)> {
            let t = |f: &PlannedFault| (f.template.demote, f.template.replace, f.template.promote);
            s.iter().map(t).collect()
        };
        let want = [
            (true, false, false),
            (false, true, false),
            (false, false, true),
        ];
        assert_eq!(kept(&steps), want);
        assert_eq!(kept(&again.timed.unwrap()), kept(&steps), "{text}");
    }

    #[test]
    fn corrupt_and_frames_steps_keep_their_file_and_mode() {
        let file = "[[step]]\nat = \"2s\"\nkind = \"corrupt\"\ntarget = \"n2\"\n\
                    file = \"acceptedEpoch\"\nduration = \"3s\"\n\n[[step]]\nat = \"6s\"\n\
                    kind = \"frames\"\ntarget = \"n1\"\nmode = \"garbage\"\nduration = \"1s\"\n";
        let steps = Schedule::from_toml("t", file).unwrap().timed.unwrap();
        let text = to_toml(&steps, "replay", false);
        let again = Schedule::from_toml("t", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let kept = |s: &[PlannedFault]| -> Vec<(Option<String>, Option<FrameMode>)> {
            let t = |f: &PlannedFault| (f.template.file.clone(), f.template.frames);
            s.iter().map(t).collect()
        };
        let want = vec![
            (Some("acceptedEpoch".to_string()), None),
            (None, Some(FrameMode::Garbage)),
        ];
        assert_eq!(kept(&steps), want);
        assert_eq!(kept(&again.timed.unwrap()), want, "{text}");
    }

    #[test]
    fn a_recorded_corrupt_is_replayed_on_the_file_it_damaged() {
        // The start's value as a history line holds it.
        let text = r#"{"nodes":["n2"],"file":"acceptedEpoch","damage":{"n2":{"op":"truncate"}}}"#;
        let value: FaultValue = serde_json::from_str(text).unwrap();
        let nodes = ["n1".to_string(), "n2".to_string(), "n3".to_string()];
        let start = RecordedStart {
            value: &value,
            line: "",
            nodes: &nodes,
        };
        let fresh = super::super::schedule::default_template(FaultKind::Corrupt);
        let t = faults::of(FaultKind::Corrupt).replayed(fresh, &start);
        assert_eq!(t.unwrap().unwrap().file.as_deref(), Some("acceptedEpoch"));
    }

    #[test]
    fn bad_steps_name_the_line_and_the_fix() {
        let err = |text: &str| Schedule::from_toml("t", text).unwrap_err();
        let e = err("[[step]]\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"1s\"\n");
        assert!(
            e.starts_with("line 1") && e.contains("at is missing"),
            "{e}"
        );
        let e =
            err("[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"leader\"\nduration = \"1s\"\n");
        assert!(e.contains("names its nodes"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"kill\"\nduration = \"1s\"\n");
        assert!(e.contains("names its nodes"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"partition\"\nshape = \"random-halves\"\nduration = \"1s\"\n");
        assert!(e.contains("random shapes are not exact"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"clock\"\ntarget = \"n1\"\ndelta = \"60s\"\nduration = \"1s\"\n");
        assert!(e.contains("needs a sign"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"1s\"\ncolour = 3\n");
        assert!(e.starts_with("line 1") && e.contains("colour"), "{e}");
        let e = err("[[fault]]\nkind = \"kill\"\n\n[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"1s\"\n");
        assert!(e.contains("[[fault]] and [[step]]"), "{e}");
        let e = err("interval = \"2s\"\n[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"1s\"\n");
        assert!(
            e.starts_with("line 1") && e.contains("own at and duration"),
            "{e}"
        );
        let e = err("[[step]]\nat = \"1s\"\nkind = \"partition\"\ndrops = { n1 = [\"n1\"] }\nduration = \"1s\"\n");
        assert!(e.contains("cannot drop itself"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"n1\"\nduration = \"1s\"\nweight = 2\n");
        assert!(e.contains("weight"), "{e}");
        let packet = |links: &str| {
            err(&format!(
                "[[step]]\nat = \"1s\"\nkind = \"packet\"\n{links}\nduration = \"1s\"\n"
            ))
        };
        let e = packet("links = [[\"n1\", \"n1\"]]");
        assert!(e.starts_with("line 1") && e.contains("n1 -> n1"), "{e}");
        let e = packet("links = [[\"n1\"]]");
        assert!(e.contains("[from, to] pairs"), "{e}");
        let e = packet("links = [[\"n1\", \"n2\"]]\ntarget = \"n3\"");
        assert!(e.contains("leave out target"), "{e}");
        let e = err("[[step]]\nat = \"1s\"\nkind = \"kill\"\ntarget = \"n1\"\nlinks = [[\"n1\", \"n2\"]]\nduration = \"1s\"\n");
        assert!(e.contains("links is only for kind = \"packet\""), "{e}");
    }
}
