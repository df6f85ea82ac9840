//! Each fault on a real 3-node cluster, through `fle-chaos test`, judged from the history it
//! records: the fault had its effect on the cluster, and it was undone.

use crate::support;

use crate::support::run::{
    leftovers, nemesis_done, resources, root_or_skip, run_dir, spawn_test, wait_exit,
};
use fle_chaos::api::{NodeStatus, ServerState};
use fle_chaos::history::store::read_history;
use fle_chaos::history::{Event, EventType, F, NEMESIS};
use std::path::Path;
use std::time::Duration;

/// Runs `fle-chaos test` on 3 nodes with `schedule` (TOML text) and returns the history.
fn run_with(schedule: &str, time_limit: &str, seed: &str, dir: &Path) -> Vec<Event> {
    let file = dir.join("schedule.toml");
    std::fs::write(&file, schedule).unwrap();
    let out = dir.join("reports");
    let node = support::run::fle_node();
    let args = [
        "--nodes",
        "3",
        "--time-limit",
        time_limit,
        "--seed",
        seed,
        "--nemesis-file",
        file.to_str().unwrap(),
    ];
    let mut child = spawn_test(&args, &out, &node);
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert!(
        matches!(code, Some(0..=2)),
        "fle-chaos test exited {code:?}: {stderr}"
    );
    let run = run_dir(&out).expect("the run folder");
    let left = leftovers(&resources(&run));
    assert!(left.is_empty(), "left behind: {left:?}");
    read_history(&fle_chaos::history::file::in_run(&run)).unwrap()
}

fn fault_node(e: &Event) -> String {
    e.value["nodes"][0]
        .as_str()
        .expect("the fault names its node")
        .to_string()
}

fn status(e: &Event) -> Option<NodeStatus> {
    (e.f == F::Status && e.kind == EventType::Ok)
        .then(|| serde_json::from_value(e.value.clone()).ok())
        .flatten()
}

/// Status reads of `node` between two times (ns).
fn reads<'a>(
    h: &'a [Event],
    node: &'a str,
    from: u64,
    to: u64,
) -> impl Iterator<Item = &'a Event> + 'a {
    h.iter().filter(move |e| {
        e.f == F::Status && e.node.as_deref() == Some(node) && e.time > from && e.time < to
    })
}

/// The first time in [from, to) when a quorum-backed leader (`history::view`'s definition,
/// reads taken from `from` on) other than `not` exists, and that leader's sid.
fn new_quorum_leader(h: &[Event], not: &str, from: u64, to: u64) -> Option<(u64, u64)> {
    let nodes: Vec<String> = (1..=3).map(fle_chaos::history::node_name).collect();
    let mut view = fle_chaos::history::view::View::new(&nodes);
    for (pos, e) in h.iter().enumerate().take_while(|(_, e)| e.time < to) {
        let text = serde_json::to_string(e).unwrap();
        let line = fle_chaos::history::line::decode(&text).unwrap();
        let fed = view.of_line(pos as u32, &line);
        view.feed(fed);
        if e.time < from {
            continue;
        }
        if let Some(l) = view.quorum_leader(from) {
            if fle_chaos::history::node_name(l.sid) != not {
                return Some((e.time, l.sid));
            }
        }
    }
    None
}

/// Whether `node` is seen following some leader in [from, to).
fn rejoined(h: &[Event], node: &str, from: u64, to: u64) -> bool {
    reads(h, node, from, to)
        .filter_map(status)
        .any(|s| s.state == ServerState::Following)
}

/// Whether `node` answered a status read it was sent while down (killed or stopped) in
/// (from, to), and how many reads of it that window holds. One observer reads each node, one
/// read at a time, and a read is recorded when it completes: so the first read recorded after
/// `from` may have been answered just before the fault, however late a loaded machine records
/// it. Every later one was sent after the fault.
fn answered_while_down(h: &[Event], node: &str, from: u64, to: u64) -> (bool, usize) {
    let during: Vec<&Event> = reads(h, node, from, to).collect();
    let answered = during.iter().skip(1).any(|e| e.kind == EventType::Ok);
    (answered, during.len())
}

const ONE_FAULT: &str = "interval = \"3s\"\nduration = \"4s\"\n";
const SEC: u64 = 1_000_000_000;

#[test]
fn kill_stops_the_process_the_others_elect_and_it_rejoins() {
    if !root_or_skip("kill_stops_the_process_the_others_elect_and_it_rejoins") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = run_with(
        &format!("{ONE_FAULT}[[fault]]\nkind = \"kill\"\ntarget = \"leader\"\n"),
        "10",
        "1",
        dir.path(),
    );
    let kill = nemesis_done(&h, F::Kill)[0];
    let start = nemesis_done(&h, F::Start)[0];
    let victim = fault_node(kill);
    assert!(
        kill.value["pids"][&victim].as_u64().is_some(),
        "the kill records the pid: {kill:?}"
    );
    // Reads that started after the kill cannot be answered by a dead process.
    let (answered, reads) = answered_while_down(&h, &victim, kill.time, start.time);
    assert!(reads > 1, "{victim} was read {reads} time(s) while killed");
    assert!(!answered, "{victim} answered while killed");
    assert!(
        new_quorum_leader(&h, &victim, kill.time, start.time).is_some(),
        "no new leader while {victim} was dead"
    );
    assert!(
        rejoined(&h, &victim, start.time, u64::MAX),
        "{victim} did not rejoin as a follower"
    );
}

#[test]
fn pause_silences_the_leader_the_others_elect_after_sync_limit_and_it_rejoins() {
    if !root_or_skip("pause_silences_the_leader_the_others_elect_after_sync_limit_and_it_rejoins") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = run_with(
        &format!("{ONE_FAULT}[[fault]]\nkind = \"pause\"\ntarget = \"leader\"\n"),
        "10",
        "2",
        dir.path(),
    );
    let pause = nemesis_done(&h, F::Pause)[0];
    let resume = nemesis_done(&h, F::Resume)[0];
    let victim = fault_node(pause);
    let (answered, reads) = answered_while_down(&h, &victim, pause.time, resume.time);
    assert!(reads > 1, "{victim} was read {reads} time(s) while stopped");
    assert!(!answered, "{victim} answered while stopped");
    let (at, _) = new_quorum_leader(&h, &victim, pause.time, resume.time)
        .expect("a new leader during the pause");
    // Nothing closes on a pause: followers notice only after syncLimit ticks (5 x 200 ms).
    let waited = Duration::from_nanos(at - pause.time);
    assert!(
        waited >= Duration::from_millis(800),
        "new leader after only {waited:?}"
    );
    assert!(
        rejoined(&h, &victim, resume.time, u64::MAX),
        "{victim} did not rejoin as a follower"
    );
}

#[test]
fn isolating_the_leader_makes_it_step_down_while_the_controller_still_reads_it() {
    if !root_or_skip("isolating_the_leader_makes_it_step_down_while_the_controller_still_reads_it")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 6 s after the heal: the isolated node re-sends its votes with ZooKeeper's back-off
    // (doubling from finalizeWait), so after 4 s cut off its next try can be ~2 s after the heal.
    let h = run_with(
        &format!("{ONE_FAULT}[[fault]]\nkind = \"partition\"\nshape = \"isolate-leader\"\n"),
        "13",
        "3",
        dir.path(),
    );
    let cut = nemesis_done(&h, F::Partition)[0];
    let heal = nemesis_done(&h, F::Heal)
        .into_iter()
        .find(|e| e.time > cut.time)
        .unwrap();
    let isolated = cut.value["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c.as_array().unwrap().len() == 1)
        .expect("a component of one node")[0]
        .as_str()
        .unwrap()
        .to_string();
    let during: Vec<_> = reads(&h, &isolated, cut.time, heal.time).collect();
    assert!(
        during.iter().all(|e| e.kind == EventType::Ok),
        "the controller lost {isolated} during the partition"
    );
    assert!(
        during
            .iter()
            .filter_map(|e| status(e))
            .any(|s| s.state != ServerState::Leading),
        "the isolated {isolated} never stopped leading"
    );
    assert!(
        new_quorum_leader(&h, &isolated, cut.time, heal.time).is_some(),
        "the majority elected no leader"
    );
    assert!(
        rejoined(&h, &isolated, heal.time, u64::MAX),
        "{isolated} did not rejoin as a follower"
    );
}

#[test]
fn clock_bump_moves_the_node_wall_clock_and_reset_brings_it_back() {
    if !root_or_skip("clock_bump_moves_the_node_wall_clock_and_reset_brings_it_back") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = run_with(
        &format!("{ONE_FAULT}[[fault]]\nkind = \"clock\"\nmode = \"bump\"\ndelta = \"+120s\"\ntarget = \"n2\"\n"),
        "10",
        "4",
        dir.path(),
    );
    let bump = nemesis_done(&h, F::Clock)[0];
    let reset = nemesis_done(&h, F::Clock)[1];
    assert_eq!(reset.value["mode"], "reset");
    // n2's clock minus n1's (real) clock, from reads close together in time.
    let skew_between = |from: u64, to: u64| -> Vec<i64> {
        let mut last_n1: Option<(u64, i64)> = None;
        let mut out = Vec::new();
        for e in h.iter().filter(|e| e.time > from && e.time < to) {
            let Some(s) = status(e) else { continue };
            match e.node.as_deref() {
                Some("n1") => last_n1 = Some((e.time, s.wall_clock_ms)),
                Some("n2") => {
                    if let Some((t, c)) = last_n1.filter(|(t, _)| e.time - t < SEC / 20) {
                        out.push(s.wall_clock_ms - c - ((e.time - t) / 1_000_000) as i64);
                    }
                }
                _ => {}
            }
        }
        out
    };
    // The reset's invoke, not its info: the clock is back before the info is recorded.
    let reset_asked = h
        .iter()
        .filter(|e| e.process == NEMESIS && e.f == F::Clock && e.kind == EventType::Invoke)
        .nth(1)
        .expect("the reset's invoke");
    let skewed = skew_between(bump.time + SEC / 10, reset_asked.time);
    assert!(!skewed.is_empty());
    assert!(
        skewed.iter().all(|d| (d - 120_000).abs() < 1_000),
        "skew during the bump: {skewed:?}"
    );
    let after = skew_between(reset.time + SEC / 10, u64::MAX);
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|d| d.abs() < 1_000),
        "skew after the reset: {after:?}"
    );
}

#[test]
fn the_same_seed_gives_the_same_faults() {
    if !root_or_skip("the_same_seed_gives_the_same_faults") {
        return;
    }
    let schedule = "interval = \"1s\"\nduration = \"1s\"\n\
        [[fault]]\nkind = \"kill\"\ntarget = \"random\"\n\
        [[fault]]\nkind = \"partition\"\nshape = \"random-halves\"\n\
        [[fault]]\nkind = \"clock\"\ndelta = \"30s\"\ntarget = \"minority\"\n";
    // What a fault did, without pids (new on every run) and times.
    let faults = |h: &[Event]| -> Vec<String> {
        h.iter()
            .filter(|e| e.process == NEMESIS && e.kind == EventType::Info)
            .map(|e| {
                let v = &e.value;
                format!(
                    "{:?} {} {} {} {}",
                    e.f, v["nodes"], v["drops"], v["offset_ms"], v["mode"]
                )
            })
            .collect()
    };
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let first = faults(&run_with(schedule, "9", "77", a.path()));
    let second = faults(&run_with(schedule, "9", "77", b.path()));
    let other = faults(&run_with(schedule, "9", "78", c.path()));
    // How many faults fit into the 9 s is the machine's (a loaded one applied one fewer in
    // one of two runs); which faults come, in which order, is the seed's.
    let fitted = first.len().min(second.len()).min(other.len());
    assert!(fitted >= 5, "{first:?}\n{second:?}\n{other:?}");
    assert_eq!(
        first[..fitted],
        second[..fitted],
        "the same seed, the same faults"
    );
    assert_ne!(
        first[..fitted],
        other[..fitted],
        "another seed should give other faults"
    );
}

/// `frames` at n1 (a follower: n3 wins the first election), then the leader killed a second
/// later, so n1's vote is needed for the next quorum (2 of 3). Returns the history and
/// what n1's `/status` said at some read: (`wire.receiver_dead`, a bad notification counted).
fn frames_then_kill_leader(bug: Option<&str>, dir: &Path) -> (Vec<Event>, (bool, bool)) {
    let schedule = "interval = \"2s\"\nduration = \"4s\"\n\
        [[fault]]\nkind = \"frames\"\nmode = \"truncated\"\ntarget = \"n1\"\ncompose = \"frames+kill\"\n\
        [[fault.with]]\nkind = \"kill\"\ntarget = \"leader\"\nafter = \"1s\"\n";
    let file = dir.join("schedule.toml");
    std::fs::write(&file, schedule).unwrap();
    let out = dir.join("reports");
    let mut args = vec![
        "--nodes",
        "3",
        "--time-limit",
        "10",
        "--seed",
        "5",
        "--nemesis-file",
        file.to_str().unwrap(),
        // The deaf n1 never rejoins: do not wait the default for it to settle.
        "--recovery-timeout",
        "2",
    ];
    if let Some(b) = bug {
        args.extend(["--bug", b]);
    }
    let mut child = spawn_test(&args, &out, &support::run::fle_node());
    // n1's own /status (the history keeps only the shared fields), while the run goes on.
    let (mut dead, mut bad) = (false, false);
    support::run::wait_for(Duration::from_secs(30), || {
        let cfg =
            run_dir(&out).and_then(|r| std::fs::read_to_string(r.join("nodes/n1/zoo.cfg")).ok());
        if let Some(s) = cfg.and_then(|c| node_status(&c)) {
            dead |= s["wire"]["receiver_dead"] == true;
            bad |= s["wire"]["bad_notifications"].as_u64() > Some(0);
        }
        (dead && bad) || matches!(child.try_wait(), Ok(Some(_)))
    });
    let code = wait_exit(&mut child, Duration::from_secs(120));
    let stderr = std::fs::read_to_string(out.with_extension("stderr")).unwrap_or_default();
    assert!(matches!(code, Some(0..=2)), "exited {code:?}: {stderr}");
    let run = run_dir(&out).expect("the run folder");
    let left = leftovers(&resources(&run));
    assert!(left.is_empty(), "left behind: {left:?}");
    (
        read_history(&fle_chaos::history::file::in_run(&run)).unwrap(),
        (dead, bad),
    )
}

/// One `GET /status` of the node whose zoo.cfg is `cfg` (its admin address), as JSON.
fn node_status(cfg: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let key = |k: &str| {
        cfg.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    let addr = format!(
        "{}:{}",
        key("admin.serverAddress=")?,
        key("admin.serverPort=")?
    );
    let addr: std::net::SocketAddr = addr.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"GET /status HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()
}

#[test]
fn truncated_frames_are_shrugged_off_by_a_correct_node_and_deafen_the_buggy_one() {
    if !root_or_skip("truncated_frames_are_shrugged_off_by_a_correct_node_and_deafen_the_buggy_one")
    {
        return;
    }
    // Both clusters at once: the suite's time budget.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let buggy_dir = b.path().to_path_buf();
    let buggy =
        std::thread::spawn(move || frames_then_kill_leader(Some("deaf-on-truncated"), &buggy_dir));
    let (correct, correct_dead) = frames_then_kill_leader(None, a.path());
    let (buggy, buggy_dead) = buggy.join().unwrap();
    for (h, bug) in [(&correct, false), (&buggy, true)] {
        let frames = nemesis_done(h, F::Frames)[0];
        let sent = &frames.value["sent"]["n1"];
        assert_eq!(sent["as_sid"], 3, "n1 hears n3's connection: {frames:?}");
        assert_eq!(sent["mode"], "truncated");
        assert!(sent["bytes_sent"].as_u64().unwrap() > sent["hello_bytes"].as_u64().unwrap());
        let kill = nemesis_done(h, F::Kill)[0];
        let start = nemesis_done(h, F::Start)[0];
        assert_eq!(fault_node(kill), "n3", "the leader was n3 (bug: {bug})");
        let next = new_quorum_leader(h, "n3", kill.time, start.time);
        if bug {
            assert!(next.is_none(), "a deaf n1 cannot vote: {next:?}");
        } else {
            let (_, sid) = next.expect("n1 and n2 elect without n3");
            assert!(sid == 1 || sid == 2);
        }
        // The heal that closes the fault's interval.
        assert!(nemesis_done(h, F::Heal)
            .iter()
            .any(|e| e.value["undoes"] == "frames"));
    }
    assert_eq!(
        buggy_dead,
        (true, true),
        "the buggy n1's /status: receiver_dead, bad"
    );
    assert_eq!(
        correct_dead,
        (false, true),
        "the correct n1 dropped the message and lives"
    );
}

/// `replace = true`: the removed follower is killed, wiped and started afresh (epoch 0, an
/// empty log, the first config), and once added back it is synced from the leader.
#[test]
fn reconfig_replace_restarts_the_removed_server_empty_and_the_leader_syncs_it_back() {
    let test = "reconfig_replace_restarts_the_removed_server_empty_and_the_leader_syncs_it_back";
    if !root_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = run_with(
        &format!(
            "{ONE_FAULT}[[fault]]\nkind = \"reconfig\"\ntarget = \"follower\"\nreplace = true\n"
        ),
        "12",
        "5",
        dir.path(),
    );
    let remove = nemesis_done(&h, F::Remove)[0];
    assert_eq!(remove.value["replace"], true, "{remove:?}");
    let removed_at = remove.value["version"].as_u64().expect("the new version");
    let victim = fault_node(remove);
    let kill = nemesis_done(&h, F::Kill)[0];
    let start = nemesis_done(&h, F::Start)[0];
    assert_eq!(
        (fault_node(kill), kill.value["replace"].clone()),
        (victim.clone(), true.into())
    );
    assert_eq!(start.value["wiped"], true, "{start:?}");
    let add = nemesis_done(&h, F::Add)[0];
    let added_at = add.value["version"].as_u64().expect("added back");
    let of_victim = |e: &&Event| e.node.as_deref() == Some(victim.as_str());
    let reads = |from: u64| {
        (h.iter().filter(of_victim))
            .filter(move |e| e.time > from)
            .filter_map(status)
    };
    let fresh = reads(start.time)
        .next()
        .expect("a read after the fresh start");
    assert_eq!(
        (fresh.peer_epoch, fresh.last_zxid, fresh.config.is_none()),
        (0, 0, true),
        "{victim} started empty, on the first config: {fresh:?}"
    );
    let synced = reads(add.time)
        .any(|s| s.last_zxid >= added_at && s.config.is_some_and(|c| c.version >= added_at));
    assert!(
        synced && added_at > removed_at,
        "{victim} was synced back to {added_at:#x}"
    );
    let run = run_dir(&dir.path().join("reports")).unwrap();
    let results = fle_chaos::commands::run::child::read_results(&run).unwrap();
    let valid = results.valid == fle_chaos::checker::Validity::True;
    assert!(valid, "{}", support::run::why_not_valid(&run));
}

/// The config a status read reports: (version, voters); (0, []) under the static config.
fn config_of(e: &Event) -> Option<(u64, Vec<u64>)> {
    let s = status(e)?;
    Some(s.config.map_or((0, Vec::new()), |c| (c.version, c.voters)))
}

#[test]
fn reconfig_removes_the_leader_the_others_lead_under_the_new_config_and_it_is_added_back() {
    let test =
        "reconfig_removes_the_leader_the_others_lead_under_the_new_config_and_it_is_added_back";
    if !root_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = run_with(
        &format!("{ONE_FAULT}[[fault]]\nkind = \"reconfig\"\ntarget = \"leader\"\n"),
        "12",
        "3",
        dir.path(),
    );
    let remove = nemesis_done(&h, F::Remove)[0];
    let add = nemesis_done(&h, F::Add)[0];
    assert_eq!(remove.kind, EventType::Info, "{remove:?}");
    let victim = fault_node(remove);
    let removed_at = remove.value["version"].as_u64().expect("the new version");
    let added_at = add.value["version"]
        .as_u64()
        .expect("the version adding it back");
    assert!(added_at > removed_at, "{remove:?} {add:?}");
    let sid = fle_chaos::history::sid_of(&victim).unwrap();
    // Between the two, the others lead and follow under the config without it; it leads not.
    let between = |e: &&Event| e.time > remove.time && e.time < add.time;
    let others: Vec<(u64, Vec<u64>)> = (h.iter().filter(between))
        .filter(|e| e.node.as_deref() != Some(victim.as_str()))
        .filter_map(config_of)
        .filter(|(v, _)| *v == removed_at)
        .collect();
    assert!(
        !others.is_empty(),
        "no other node reported config {removed_at:#x}"
    );
    assert!(others.iter().all(|(_, voters)| !voters.contains(&sid)));
    let led = (h.iter().filter(between))
        .filter(|e| e.node.as_deref() == Some(victim.as_str()))
        .filter_map(status)
        .any(|s| {
            s.state == ServerState::Leading && s.config.is_some_and(|c| c.version == removed_at)
        });
    assert!(!led, "{victim} led under the config that removed it");
    // At the end every node reports the newest config, which lists every node again.
    let newest = (nemesis_done(&h, F::Add).iter().rev())
        .find_map(|e| e.value["version"].as_u64())
        .expect("an add that changed the config");
    let last: Vec<(u64, Vec<u64>)> = (1..=3)
        .filter_map(|i| {
            let n = fle_chaos::history::node_name(i);
            let of_n = |e: &&Event| e.node.as_deref() == Some(n.as_str());
            h.iter().rev().filter(of_n).find_map(config_of)
        })
        .collect();
    assert_eq!(last.len(), 3, "every node read at the end");
    let all_back = |(v, voters): &(u64, Vec<u64>)| *v == newest && voters.len() == 3;
    assert!(last.iter().all(all_back), "{last:?}");
    let run = run_dir(&dir.path().join("reports")).unwrap();
    let results = fle_chaos::commands::run::child::read_results(&run).unwrap();
    let valid = results.valid == fle_chaos::checker::Validity::True;
    assert!(valid, "{}", support::run::why_not_valid(&run));
}
