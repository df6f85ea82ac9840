//! Reading a schedule file: a seeded schedule (`[[fault]]` entries, dealt by `plan`) or a
//! timed one (`[[step]]`s, parsed by `timed`), both into the one `Schedule`. Errors name the
//! file, the line and the fix.

use super::raw_fault::RawFault;
use super::schedule::{Schedule, TargetSpec};
use super::timing::Timing;
use super::units::{line_of, parse_duration, table_line, toml_error};
use crate::exit::bad_input;
use anyhow::Result;
use serde::Deserialize;
use std::path::Path;

impl Schedule {
    /// Reads a schedule file. Errors name the file, the line and what is wrong.
    pub fn from_file(path: &Path) -> Result<Schedule> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            bad_input(format!(
                "--nemesis-file {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut schedule = Schedule::from_toml(&name, &text)
            .map_err(|msg| bad_input(format!("{}: {msg}", path.display())))?;
        schedule.origin = path.display().to_string();
        Ok(schedule)
    }

    /// Parses schedule TOML; the error is "line N: what is wrong".
    pub fn from_toml(name: &str, text: &str) -> Result<Schedule, String> {
        if super::timed::is_timed(text) {
            return super::timed::from_toml(name, text);
        }
        let raw: RawSchedule = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let line_of = |needle: &str| line_of(text, needle);
        let interval = parse_duration(&raw.interval.unwrap_or_else(|| "10s".into()))
            .map_err(|e| format!("line {}: interval: {e}", line_of("interval")))?;
        let duration = parse_duration(&raw.duration.unwrap_or_else(|| "5s".into()))
            .map_err(|e| format!("line {}: duration: {e}", line_of("duration")))?;
        let timing = match raw.timing.as_deref() {
            None => Timing::Fixed,
            Some(t) => Timing::parse(t).ok_or_else(|| {
                format!(
                    "line {}: timing = \"{t}\" is unknown; use fixed, exponential or jittered",
                    line_of("timing")
                )
            })?,
        };
        let mut faults = Vec::new();
        for (i, f) in raw.faults.into_iter().enumerate() {
            let line = table_line(text, "[[fault]]", i);
            let mut t = f
                .into_template()
                .map_err(|e| format!("line {line}: in this [[fault]]: {e}"))?;
            for (key, spec) in [("target", Some(&t.target)), ("watch", t.watch.as_ref())] {
                if let Some(TargetSpec::Main | TargetSpec::Others) = spec {
                    return Err(format!(
                        "line {line}: in this [[fault]]: {key} = \"{}\" names nodes of a composition's main fault: use it in a [[fault.with]] part",
                        spec.map(TargetSpec::describe).unwrap_or_default()
                    ));
                }
            }
            t.line = Some(line);
            faults.push(t);
        }
        if faults.is_empty() {
            return Err("no [[fault]] tables: add at least one, e.g.\n[[fault]]\nkind = \"kill\"\ntarget = \"leader\"".into());
        }
        Ok(Schedule {
            name: name.to_string(),
            origin: name.to_string(),
            interval,
            duration,
            faults,
            fake_monotonic: raw.fake_monotonic,
            zookeeper_config: raw.zookeeper_config,
            timing,
            timed: None,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    interval: Option<String>,
    duration: Option<String>,
    #[serde(default)]
    fake_monotonic: bool,
    /// "fixed" (default) | "exponential" | "jittered".
    timing: Option<String>,
    #[serde(default, rename = "fault")]
    faults: Vec<RawFault>,
    /// `["KEY=VALUE"]`: ZooKeeper settings the schedule needs (`Schedule::zookeeper_config`).
    #[serde(default)]
    zookeeper_config: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fault::iptables::Cut;
    use crate::nemesis::schedule::*;
    use crate::nemesis::trigger::Trigger;
    use std::time::Duration;

    #[test]
    fn flags_name_kinds() {
        let s = Schedule::from_flags(
            "kill,partition",
            Duration::from_secs(5),
            Duration::from_secs(3),
        )
        .unwrap();
        assert_eq!(s.kinds(), vec![FaultKind::Kill, FaultKind::Partition]);
        assert!(Schedule::from_flags("none", Duration::ZERO, Duration::ZERO)
            .unwrap()
            .faults
            .is_empty());
        let err = Schedule::from_flags("kill,meteor", Duration::ZERO, Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("meteor"), "{err}");
    }

    #[test]
    fn a_file_with_every_field_parses() {
        let text = r#"
interval = "4s"
duration = "2s"
fake_monotonic = true
[[fault]]
kind = "partition"
shape = "majorities-ring"
weight = 3
[[fault]]
kind = "clock"
mode = "strobe"
delta = "+5s"
period = "100ms"
target = "n1,n2"
"#;
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.interval, Duration::from_secs(4));
        assert!(s.fake_monotonic);
        assert_eq!(s.faults[0].shape, Some(PartitionShape::MajoritiesRing));
        assert_eq!(s.faults[0].weight, 3);
        assert_eq!(
            s.faults[1].clock,
            Some(ClockMode::Strobe {
                delta_ms: 5000,
                period_ms: 100
            })
        );
        assert_eq!(
            s.faults[1].target,
            TargetSpec::Nodes(vec!["n1".into(), "n2".into()])
        );
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let err = Schedule::from_toml(
            "t",
            "interval = \"4s\"\n[[fault]]\nkind = \"kill\"\ntarget = 7\n",
        )
        .unwrap_err();
        assert!(err.starts_with("line 4"), "{err}");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"kill\"\n\n[[fault]]\nkind = \"partition\"\nshape = \"donut\"\n",
        )
        .unwrap_err();
        assert!(
            err.starts_with("line 4") && err.contains("donut") && err.contains("majorities-ring"),
            "{err}"
        );
        let err = Schedule::from_toml("t", "interval = \"4s\"\n").unwrap_err();
        assert!(err.contains("[[fault]]"), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nshape = \"halves\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"partition\""), "{err}");
        let err = Schedule::from_toml("t", "colour = 1\n[[fault]]\nkind = \"kill\"\n").unwrap_err();
        assert!(err.starts_with("line 1") && err.contains("colour"), "{err}");
        // An unknown key inside a [[fault]] is named on its own line, not the one before.
        let err = Schedule::from_toml(
            "t",
            "interval = \"4s\"\n[[fault]]\nkind = \"kill\"\ncolour = 1\n",
        )
        .unwrap_err();
        assert!(err.starts_with("line 4") && err.contains("colour"), "{err}");
    }

    #[test]
    fn a_partition_may_cut_only_the_quorum_port() {
        let s = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"partition\"\nshape = \"one-way\"\nport = \"quorum\"\n",
        )
        .unwrap();
        assert_eq!(s.faults[0].cut, Cut::Quorum);
        let s = Schedule::from_toml("t", "[[fault]]\nkind = \"partition\"\n").unwrap();
        assert_eq!(s.faults[0].cut, Cut::Every, "every packet by default");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"partition\"\nport = \"election\"\n",
        )
        .unwrap_err();
        assert!(
            err.contains("election") && err.contains("\"quorum\""),
            "{err}"
        );
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nport = \"quorum\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"partition\""), "{err}");
    }

    #[test]
    fn frames_faults_parse_and_their_mistakes_are_named() {
        let s = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"frames\"\nmode = \"garbage\"\ntarget = \"leader\"\n",
        )
        .unwrap();
        let f = &s.faults[0];
        assert_eq!(
            (f.kind, f.frames),
            (FaultKind::Frames, Some(FrameMode::Garbage))
        );
        assert_eq!(f.target, TargetSpec::Leader);
        let d = Schedule::from_toml("t", "[[fault]]\nkind = \"frames\"\n").unwrap();
        assert_eq!(d.faults[0].frames, Some(FrameMode::Truncated));
        assert_eq!(d.faults[0].target, TargetSpec::Follower);
        let err = Schedule::from_toml("t", "\n[[fault]]\nkind = \"frames\"\nmode = \"cut\"\n")
            .unwrap_err();
        assert!(
            err.starts_with("line 2") && err.contains("truncated or garbage"),
            "{err}"
        );
        let err =
            Schedule::from_toml("t", "[[fault]]\nkind = \"frames\"\ndelta = \"1s\"\n").unwrap_err();
        assert!(err.contains("only for kind = \"clock\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nmode = \"garbage\"\n")
            .unwrap_err();
        assert!(err.contains("\"frames\""), "{err}");
    }

    #[test]
    fn groups_parse_and_are_checked() {
        let ok = "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\ngroups = [[\"n1\", \"n2\"], [\"n3\"]]\n";
        let s = Schedule::from_toml("t", ok).unwrap();
        assert_eq!(s.faults[0].groups.as_ref().unwrap().len(), 2);
        let twice =
            "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\ngroups = [[\"n1\"], [\"n1\"]]\n";
        assert!(Schedule::from_toml("t", twice)
            .unwrap_err()
            .contains("two groups"));
        let missing = "[[fault]]\nkind = \"partition\"\nshape = \"groups\"\n";
        assert!(Schedule::from_toml("t", missing)
            .unwrap_err()
            .contains("needs groups"));
        let stray = "[[fault]]\nkind = \"partition\"\nshape = \"halves\"\ngroups = [[\"n1\"]]\n";
        assert!(Schedule::from_toml("t", stray)
            .unwrap_err()
            .contains("only for shape"));
    }

    #[test]
    fn timing_triggers_and_parts_parse() {
        let text = "timing = \"exponential\"\n[[fault]]\nkind = \"kill\"\ntarget = \"trigger\"\nwhen = \"after-write-ack\"\nwait = \"3s\"\n[[fault]]\nkind = \"partition\"\nshape = \"leader-minority\"\ncompose = \"cut+kill\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"random\"\nafter = \"1s\"\nduration = \"2s\"\n";
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.timing, Timing::Exponential);
        assert_eq!(s.faults[0].when, Some(Trigger::AfterWriteAck));
        assert_eq!(s.faults[0].target, TargetSpec::Trigger);
        assert_eq!(s.faults[0].wait, Some(Duration::from_secs(3)));
        let cut = &s.faults[1];
        assert_eq!(cut.shape, Some(PartitionShape::LeaderMinority));
        assert_eq!(cut.with[0].after, Duration::from_secs(1));
        assert_eq!(cut.group_name().as_deref(), Some("cut+kill"));
        assert_eq!(
            cut.span(Duration::from_secs(2), Duration::from_secs(5)),
            Duration::from_secs(3)
        );
        assert_eq!(s.faults[1].line, Some(7));
        // A part with its own trigger, aimed at the node it names.
        let text = "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"trigger\"\nwhen = \"epoch-without-write\"\nwait = \"2s\"\nafter = \"100ms\"\nduration = \"3s\"\n";
        let part = &Schedule::from_toml("t", text).unwrap().faults[0].with[0];
        assert_eq!(part.when, Some(Trigger::EpochWithoutWrite));
        assert_eq!(part.target, TargetSpec::Trigger);
        assert_eq!(part.after, Duration::from_millis(100));
        // Parts aimed at the main fault's nodes and at the rest.
        let text = "[[fault]]\nkind = \"kill\"\ntarget = \"followers-low\"\n[[fault.with]]\nkind = \"power-loss\"\ntarget = \"main\"\nwhen = \"follower-synced\"\nwait = \"2s\"\nduration = \"3s\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"others\"\n";
        let parts = &Schedule::from_toml("t", text).unwrap().faults[0].with;
        assert_eq!(parts[0].target, TargetSpec::Main);
        assert_eq!(parts[1].target, TargetSpec::Others);
    }

    #[test]
    fn aiming_mistakes_name_the_fix() {
        let bad = |text: &str, want: &str| {
            let err = Schedule::from_toml("t", text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        };
        bad(
            "timing = \"poisson\"\n[[fault]]\nkind = \"kill\"\n",
            "fixed, exponential or jittered",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"sunrise\"\n",
            "leader-in-sync",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ntarget = \"trigger\"\n",
            "needs when",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwait = \"2s\"\n",
            "only for a triggered fault",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nafter = \"2s\"\n",
            "only for a composed part",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ncompose = \"x\"\n",
            "add [[fault.with]]",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\nwhen = \"election\"\nwait = \"5s\"\nduration = \"2s\"\n",
            "shorter than the part's duration",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\ntarget = \"trigger\"\n",
            "needs when",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\ntarget = \"main\"\n",
            "use it in a [[fault.with]] part",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwatch = \"n1\"\n",
            "watch is only for a triggered fault",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"election\"\nwatch = \"trigger\"\n",
            "not a set of nodes to watch",
        );
        bad(
            "[[fault]]\nkind = \"kill\"\nwhen = \"election\"\nwatch = \"main\"\n",
            "watch = \"main\" names nodes of a composition's main fault",
        );
    }

    #[test]
    fn a_part_watches_the_nodes_it_names() {
        let text = "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"kill\"\nwhen = \"leader-in-sync\"\nwatch = \"followers-high\"\nwait = \"1s\"\nduration = \"2s\"\n";
        let s = Schedule::from_toml("t", text).unwrap();
        assert_eq!(s.faults[0].watch, None);
        assert_eq!(s.faults[0].with[0].watch, Some(TargetSpec::FollowersHigh));
    }

    fn fault(body: &str) -> Result<FaultTemplate, String> {
        Schedule::from_toml("t", &format!("[[fault]]\nkind = \"packet\"\n{body}"))
            .map(|mut s| s.faults.remove(0))
    }

    #[test]
    fn packet_modes_parse_with_their_defaults() {
        let t = fault("").unwrap();
        assert_eq!(t.packet, Some(PacketMode::Loss { percent: 30.0 }));
        assert_eq!(t.target, TargetSpec::All, "every link unless told");
        let t = fault("mode = \"delay\"\ndelay = \"80ms\"\njitter = \"10ms\"\nshape = \"one-way\"\ntarget = \"leader\"").unwrap();
        assert_eq!(
            t.packet,
            Some(PacketMode::Delay {
                delay_ms: 80,
                jitter_ms: 10
            })
        );
        assert_eq!(t.shape, Some(PartitionShape::OneWay));
        assert_eq!(
            fault("mode = \"bandwidth\"\nrate = \"1.5mbit\"")
                .unwrap()
                .packet,
            Some(PacketMode::Bandwidth { rate_kbit: 1500 })
        );
        assert_eq!(
            fault("mode = \"reorder\"").unwrap().packet,
            Some(PacketMode::Reorder {
                percent: 25.0,
                delay_ms: 50
            })
        );
        assert_eq!(
            fault("mode = \"duplicate\"\npercent = 5").unwrap().packet,
            Some(PacketMode::Duplicate { percent: 5.0 })
        );
    }

    #[test]
    fn bad_packet_settings_name_the_key_and_the_fix() {
        let err = fault("mode = \"teleport\"").unwrap_err();
        assert!(
            err.contains("teleport") && err.contains("bandwidth"),
            "{err}"
        );
        let err = fault("percent = 130").unwrap_err();
        assert!(
            err.contains("percent = 130") && err.contains("at most 100"),
            "{err}"
        );
        let err = fault("mode = \"loss\"\ndelay = \"10ms\"").unwrap_err();
        assert!(err.contains("delay does not apply"), "{err}");
        let err = fault("mode = \"delay\"\njitter = \"200ms\"").unwrap_err();
        assert!(err.contains("jitter"), "{err}");
        let err = fault("mode = \"bandwidth\"\nrate = \"fast\"").unwrap_err();
        assert!(err.contains("rate") && err.contains("kbit"), "{err}");
        let err =
            Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\npercent = 3\n").unwrap_err();
        assert!(err.contains("only for kind = \"packet\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nfile = \"txnlog\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"corrupt\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"corrupt\"\nfile = \"myid\"\n")
            .unwrap_err();
        assert!(err.contains("acceptedEpoch"), "{err}");
        let ok = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"corrupt\"\nfile = \"currentEpoch\"\n",
        )
        .unwrap();
        assert_eq!(ok.faults[0].file.as_deref(), Some("currentEpoch"));
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nrole = \"observer\"\n")
            .unwrap_err();
        assert!(err.contains("only for kind = \"reconfig\""), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"reconfig\"\nrole = \"voter\"\n")
            .unwrap_err();
        assert!(err.contains("use \"observer\""), "{err}");
        let promoted = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"reconfig\"\nrole = \"participant\"\n",
        );
        assert!(promoted.unwrap().faults[0].promote);
        let reconfig = |extra: &str| {
            let text = format!("[[fault]]\nkind = \"reconfig\"\n{extra}");
            Schedule::from_toml("t", &text).unwrap().faults[0].demote
        };
        assert!(reconfig("role = \"observer\"\n"));
        assert!(!reconfig(""));
        let replaced = |extra: &str| {
            let text = format!("[[fault]]\nkind = \"reconfig\"\n{extra}");
            Schedule::from_toml("t", &text).map(|s| s.faults[0].replace)
        };
        assert_eq!(replaced("replace = true\n"), Ok(true));
        assert_eq!(replaced(""), Ok(false));
        let err = replaced("replace = true\nrole = \"participant\"\n").unwrap_err();
        assert!(err.contains("do not go together"), "{err}");
        let err =
            Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\nreplace = true\n").unwrap_err();
        assert!(
            err.contains("replace is only for kind = \"reconfig\""),
            "{err}"
        );
    }
}
