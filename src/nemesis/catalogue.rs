//! The schedules in `nemesis/`, built into the binary so `--nemesis-file mixed` works from any
//! directory. A path that exists on disk wins over a built-in name, so users can copy and edit.

use super::schedule::Schedule;
use crate::exit::bad_input;
use anyhow::Result;
use std::path::Path;

/// (name, TOML text) of every schedule in `nemesis/`.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("mixed", include_str!("../../nemesis/mixed.toml")),
    (
        "kill-leader",
        include_str!("../../nemesis/kill-leader.toml"),
    ),
    (
        "pause-leader",
        include_str!("../../nemesis/pause-leader.toml"),
    ),
    (
        "isolate-leader",
        include_str!("../../nemesis/isolate-leader.toml"),
    ),
    (
        "partition-halves",
        include_str!("../../nemesis/partition-halves.toml"),
    ),
    (
        "partition-majorities-ring",
        include_str!("../../nemesis/partition-majorities-ring.toml"),
    ),
    (
        "partition-bridge",
        include_str!("../../nemesis/partition-bridge.toml"),
    ),
    (
        "partition-one-way",
        include_str!("../../nemesis/partition-one-way.toml"),
    ),
    ("clock-bump", include_str!("../../nemesis/clock-bump.toml")),
    (
        "clock-strobe",
        include_str!("../../nemesis/clock-strobe.toml"),
    ),
    ("power-loss", include_str!("../../nemesis/power-loss.toml")),
    // A timed schedule: ZooKeeper 3.8's ZOOKEEPER-2846 on 5 servers (docs/zookeeper.md).
    (
        "txnlog-diff-2846",
        include_str!("../../nemesis/txnlog-diff-2846.toml"),
    ),
    // ZooKeeper 3.9.3's ZOOKEEPER-4925 on 5 servers: a learner that leads with holes in its
    // committedLog (docs/zookeeper.md).
    (
        "stale-diff-4925",
        include_str!("../../nemesis/stale-diff-4925.toml"),
    ),
    // ZooKeeper 3.8.0's unsynced start-up snapshot under a power cut (docs/zookeeper.md).
    (
        "zookeeper-start-power-loss",
        include_str!("../../nemesis/zookeeper-start-power-loss.toml"),
    ),
    (
        "corrupt-txnlog",
        include_str!("../../nemesis/corrupt-txnlog.toml"),
    ),
    // ZooKeeper's own files damaged: txn log, snapshot, epoch files (docs/zookeeper.md).
    (
        "corrupt-zookeeper",
        include_str!("../../nemesis/corrupt-zookeeper.toml"),
    ),
    // Aimed and composed (issue 16).
    (
        "leader-minority",
        include_str!("../../nemesis/leader-minority.toml"),
    ),
    (
        "restart-in-election",
        include_str!("../../nemesis/restart-in-election.toml"),
    ),
    (
        "kill-leader-after-ack",
        include_str!("../../nemesis/kill-leader-after-ack.toml"),
    ),
    (
        "power-loss-after-ack",
        include_str!("../../nemesis/power-loss-after-ack.toml"),
    ),
    ("composed", include_str!("../../nemesis/composed.toml")),
    // ZOOKEEPER-1419's state: equal zxids, different peerEpochs, one round (issue 16).
    (
        "stale-voter",
        include_str!("../../nemesis/stale-voter.toml"),
    ),
    // ZOOKEEPER-1514's state: late-joined followers that miss their leader's restart.
    (
        "older-round-followers",
        include_str!("../../nemesis/older-round-followers.toml"),
    ),
    // Liveness: faults that leave a correct cluster electing (issue 16, session 5).
    (
        "clock-strobe-majority",
        include_str!("../../nemesis/clock-strobe-majority.toml"),
    ),
    (
        "blackhole-restart",
        include_str!("../../nemesis/blackhole-restart.toml"),
    ),
    (
        "staggered-restarts",
        include_str!("../../nemesis/staggered-restarts.toml"),
    ),
    // A follower restarted while its leader stands must rejoin it (refuse-repeated-epoch).
    (
        "restart-follower",
        include_str!("../../nemesis/restart-follower.toml"),
    ),
    (
        "packet-loss",
        include_str!("../../nemesis/packet-loss.toml"),
    ),
    (
        "packet-delay",
        include_str!("../../nemesis/packet-delay.toml"),
    ),
    // ZOOKEEPER-3769: truncated election frames, then the leader killed (issue 16, session 6).
    (
        "truncated-frames",
        include_str!("../../nemesis/truncated-frames.toml"),
    ),
    // ZOOKEEPER-1732: followers of one leader from two of its terms (issue 16, session 7).
    (
        "stale-joiners",
        include_str!("../../nemesis/stale-joiners.toml"),
    ),
    // ZOOKEEPER-4785's sequence: lagging followers synced into a new epoch lose power.
    (
        "epoch-before-txns",
        include_str!("../../nemesis/epoch-before-txns.toml"),
    ),
    // Dynamic reconfiguration: servers removed and added back, alone or beside other faults.
    ("membership", include_str!("../../nemesis/membership.toml")),
    // Observers promoted to voters and demoted back (needs --observers).
    (
        "promote-observer",
        include_str!("../../nemesis/promote-observer.toml"),
    ),
];

/// A schedule by path (`nemesis/kill-leader.toml`, `./my.toml`) or built-in name (`kill-leader`).
pub fn load(name_or_path: &str) -> Result<Schedule> {
    let path = Path::new(name_or_path);
    if path.exists() {
        return Schedule::from_file(path);
    }
    let Some(name) = built_in_name(path) else {
        return Err(bad_input(format!(
            "--nemesis-file {name_or_path}: no such file; give the path of an existing TOML file, \
             or a built-in schedule by its name alone (e.g. --nemesis-file mixed)"
        )));
    };
    match BUILT_IN.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => {
            let mut s = Schedule::from_toml(n, text)
                .map_err(|e| bad_input(format!("built-in schedule {n}: {e}")))?;
            s.origin = format!("built-in nemesis/{n}.toml");
            Ok(s)
        }
        None => {
            let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
            Err(bad_input(format!(
                "--nemesis-file {name_or_path}: no such file and no built-in schedule of that name; use a path to a TOML file or one of: {}",
                names.join(", ")
            )))
        }
    }
}

/// The built-in schedule a missing path may name: `NAME`, `NAME.toml` or `nemesis/NAME.toml`
/// (this repository's folder, from another working directory). A path anywhere else names a
/// file the user meant, and a typo in it must not quietly run a built-in of the same stem.
fn built_in_name(path: &Path) -> Option<String> {
    let parent = path.parent().map(|p| p.as_os_str().to_string_lossy());
    if !matches!(parent.as_deref(), None | Some("") | Some("nemesis")) {
        return None;
    }
    let ext = path.extension().map(|e| e.to_string_lossy());
    if !matches!(ext.as_deref(), None | Some("toml")) {
        return None;
    }
    path.file_stem().map(|s| s.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogue_file_parses_and_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("nemesis");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                e.ok()?
                    .path()
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
            })
            .collect();
        on_disk.sort();
        let mut built_in: Vec<String> = BUILT_IN.iter().map(|(n, _)| n.to_string()).collect();
        built_in.sort();
        assert_eq!(
            on_disk, built_in,
            "nemesis/ and BUILT_IN must list the same schedules"
        );
        for (name, _) in BUILT_IN {
            let s = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let steps = s.timed.as_ref().map_or(0, |t| t.len());
            assert!(
                !s.faults.is_empty() || steps > 0,
                "{name} has no faults and no steps"
            );
        }
    }

    /// The recorded faults of the runs docs/zookeeper.md writes up (docs/findings/) stay
    /// schedules `--nemesis-file` takes: timed, with their steps.
    #[test]
    fn every_findings_schedule_in_the_docs_parses_as_a_timed_schedule() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/findings");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let s = Schedule::from_file(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                let steps = s.timed.as_ref().map_or(0, |t| t.len());
                assert!(steps > 10, "{path:?}: {steps} steps");
                seen += 1;
            }
        }
        assert!(seen >= 2, "docs/findings holds {seen} schedules");
    }

    /// ZOOKEEPER-4785's sequence needs its steps in order whatever `mixed` draws: the main
    /// pause is undone before the first part, F1/F2 are back before the power loss watches,
    /// and L, F1, F2 return together before A and B.
    #[test]
    fn the_epoch_before_txns_steps_keep_their_order_under_any_draw() {
        use crate::nemesis::plan::plan;
        for name in ["epoch-before-txns", "mixed"] {
            let s = load(name).unwrap();
            let mut seen = 0;
            for seed in 0..40 {
                for f in plan(&s, seed, std::time::Duration::from_secs(300)) {
                    if f.annotations.get("composed").and_then(|c| c.as_str())
                        != Some("epoch-before-txns")
                    {
                        continue;
                    }
                    seen += 1;
                    let [lag, leader, power, others] = &f.parts[..] else {
                        panic!("{name}: four parts");
                    };
                    assert!(f.duration < lag.start, "{name}: main undone first");
                    assert!(lag.start + lag.duration < power.start, "{name}");
                    assert!(leader.start < lag.start + lag.duration, "{name}");
                    assert_eq!(leader.start + leader.duration, power.start + power.duration);
                    assert!(power.start + power.duration < others.start + others.duration);
                }
            }
            assert!(seen > 0, "{name} never planned it");
        }
    }

    #[test]
    fn a_missing_path_outside_nemesis_is_not_a_built_in() {
        assert_eq!(built_in_name(Path::new("mixed")).as_deref(), Some("mixed"));
        assert_eq!(
            built_in_name(Path::new("mixed.toml")).as_deref(),
            Some("mixed")
        );
        let repo = built_in_name(Path::new("nemesis/kill-leader.toml"));
        assert_eq!(repo.as_deref(), Some("kill-leader"));
        for typo in ["/root/typo/mixed.toml", "typo/mixed.toml", "mixed.yaml"] {
            assert_eq!(built_in_name(Path::new(typo)), None, "{typo}");
            let e = load(typo).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--nemesis-file {typo}: no such file")),
                "{e}"
            );
        }
        assert!(load("nemesis/mixed.toml").is_ok());
    }

    #[test]
    fn unknown_names_list_the_catalogue() {
        let err = load("no-such-schedule").unwrap_err().to_string();
        assert!(
            err.contains("kill-leader") && err.contains("no-such-schedule"),
            "{err}"
        );
    }
}
