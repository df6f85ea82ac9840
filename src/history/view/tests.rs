//! The view's own tests: each derived fact over small hand-fed histories.

use crate::history::test_feed::{Feed, MS};
use crate::history::FaultKind;

/// A node the view first hears of while a stall is open (a live recorder's view learns
/// nodes as their lines arrive) is counted, not indexed past the stall's read counts.
#[test]
fn a_node_first_seen_during_a_stall_is_counted() {
    let mut f = Feed::new();
    f.read(10, 1, "?", 0)
        .read(11, 2, "?", 0)
        .read(12, 3, "?", 0);
    f.read(20, 4, "?", 0);
    for (ms, n) in [(30, 1), (31, 2), (32, 3), (33, 4)] {
        f.read(ms, n, "?", 0);
    }
    let stalls = f.view.stalls().len();
    f.read(40, 1, "L", 1)
        .read(41, 2, "F1", 1)
        .read(42, 3, "F1", 1);
    f.read(43, 4, "F1", 1);
    assert!(
        f.view.stalls().len() > stalls,
        "the stall closed when n1 led"
    );
    let s = f.view.stalls().last().expect("a stall");
    assert!(s.group.len() >= 3 && s.fewest_reads >= 1, "{s:?}");
}

/// n1 leads epoch 1, followed by n2 and n3.
fn settled() -> Feed {
    let mut f = Feed::new();
    f.read(10, 1, "L", 1)
        .read(11, 2, "F1", 1)
        .read(12, 3, "F1", 1);
    f
}

#[test]
fn a_leader_and_a_quorum_in_broadcast_of_its_epoch() {
    let mut f = settled();
    assert_eq!(f.leader(0), Some((1, 1)));
    // Reads older than `since` do not count.
    assert_eq!(f.leader(11), None);
    // A follower of another epoch does not back it; one is not enough of three.
    f.read(20, 2, "F1", 0).read(21, 3, "?", 1);
    assert_eq!(f.leader(0), None);
    // A leader still in discovery has not established its epoch.
    let mut g = Feed::new();
    g.read(10, 1, "L-discovery", 1)
        .read(11, 2, "F1", 1)
        .read(12, 3, "F1", 1);
    assert_eq!(g.leader(0), None);
}

#[test]
fn settled_needs_every_up_node_to_rejoin_and_catch_up() {
    let mut f = Feed::new();
    f.nemesis(5, "kill", r#"{"nodes":["n3"]}"#)
        .read(10, 1, "L", 1)
        .read(11, 2, "F1", 1);
    // A quorum-backed leader, and n3 is down: nobody up is missing.
    assert!(f.view.settled(0).is_settled());
    assert_eq!(f.view.recoveries()[0].ms_to_all_rejoined, Some(6));
    // The final phase restarts n3, which is still looking: a straggler.
    f.nemesis(20, "start", r#"{"nodes":["n3"],"final":true}"#)
        .read(21, 1, "L", 1)
        .read(22, 2, "F1", 1)
        .read(23, 3, "?", 0);
    let s = f.view.settled(20 * MS);
    assert_eq!(
        (s.leader.map(|l| l.sid), s.stragglers.clone()),
        (Some(1), vec![2])
    );
    assert_eq!(f.view.final_heal().and_then(|h| h.rejoined), None);
    // Following in broadcast but behind the leader's commits: still a straggler.
    fn read(f: &mut Feed, ms: u64, node: u64, state: &str, zxid: u64) {
        let text = format!(
            r#"{{"index":0,"time":{},"process":"n{node}","type":"ok","f":"status","node":"n{node}","value":{{"state":"{state}","leader":1,"peer_epoch":1,"accepted_epoch":1,"zab_phase":"broadcast","last_zxid":{zxid},"last_committed_zxid":{zxid}}}}}"#,
            ms * MS
        );
        f.line(text);
    }
    read(&mut f, 30, 1, "LEADING", 9);
    read(&mut f, 31, 3, "FOLLOWING", 4);
    assert_eq!(f.view.settled(20 * MS).stragglers, vec![1, 2]);
    read(&mut f, 32, 2, "FOLLOWING", 9);
    read(&mut f, 33, 3, "FOLLOWING", 9);
    assert!(f.view.settled(20 * MS).is_settled());
    // Measured from the final heal: 13 ms.
    assert_eq!(f.view.final_heal().and_then(|h| h.rejoined), Some(13 * MS));
}

#[test]
fn isolate_leader_the_cut_off_leader_is_not_quorum_backed() {
    let mut f = settled();
    f.nemesis(
        100,
        "partition",
        r#"{"nodes":["n1","n2","n3"],"shape":"isolate-leader","drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#,
    );
    // Its followers have not noticed yet: still FOLLOWING n1 in broadcast, read after the
    // cut. Not a quorum-backed leader: they cannot hear it.
    f.read(101, 1, "L", 1)
        .read(102, 2, "F1", 1)
        .read(103, 3, "F1", 1);
    assert_eq!(f.leader(0), None);
    assert_eq!(f.view.recoveries().len(), 0, "no recovery in 3 ms");
    // n2 and n3 elect n2 (epoch 2): that is the recovery, 1.4 s after the cut.
    f.read(1000, 2, "?", 1)
        .read(1400, 2, "L", 2)
        .read(1500, 3, "F2", 2);
    assert_eq!(f.leader(100), Some((2, 2)));
    let r = &f.view.recoveries()[0];
    assert_eq!(
        (r.kind, r.ms_to_quorum_leader),
        (FaultKind::Partition, Some(1400))
    );
    assert_eq!(r.leader.as_deref(), Some("n2"));
    // The old leader still claims epoch 1: an overlap, open until it steps down.
    assert_eq!(f.view.claims().len(), 2);
    f.nemesis(2000, "heal", r#"{"nodes":["n1","n2","n3"],"final":true}"#);
    f.read(2100, 1, "F2", 2);
    let done = f.view.clone().finish();
    assert_eq!(done.overlaps.len(), 1);
    assert_eq!(done.overlaps[0].ms, 2100 - 1400);
    assert_eq!(done.intervals[0].end_ns, Some(2000 * MS));
    // After the final heal only reads after it count: n1 (read at 2100) following n2,
    // and n2 read leading at 2200, make a quorum then.
    f.read(2200, 2, "L", 2).read(2300, 3, "F2", 2);
    let h = f.view.final_heal().unwrap();
    assert_eq!(h.recovered.map(|r| (r.0 / MS, r.1.sid)), Some((200, 2)));
}

#[test]
fn a_killed_leader_does_not_count_until_restarted() {
    let mut f = settled();
    f.nemesis(100, "kill", r#"{"nodes":["n1"]}"#);
    // Its followers' reads still name it, but its own read is forgotten and it is down.
    f.read(101, 2, "F1", 1).read(102, 3, "F1", 1);
    assert_eq!(f.leader(0), None);
    assert!(f.view.nodes()[0].down);
    f.read(600, 3, "L", 2).read(700, 2, "F3", 2);
    assert_eq!(f.leader(100), Some((3, 2)));
    assert_eq!(f.view.recoveries()[0].ms_to_quorum_leader, Some(600));
    f.nemesis(800, "start", r#"{"nodes":["n1"]}"#);
    assert!(!f.view.nodes()[0].down);
    assert_eq!(f.view.intervals()[0].end_ns, Some(800 * MS));
}

#[test]
fn a_paused_leader_does_not_count_until_resumed() {
    let mut f = settled();
    f.nemesis(100, "pause", r#"{"nodes":["n1"]}"#);
    // Even a late read that still shows it leading does not make it a leader.
    f.read(101, 1, "L", 1)
        .read(102, 2, "F1", 1)
        .read(103, 3, "F1", 1);
    assert_eq!(f.leader(0), None);
    f.nemesis(200, "resume", r#"{"nodes":["n1"]}"#);
    assert_eq!(f.leader(0), Some((1, 1)));
    assert_eq!(f.view.recoveries()[0].ms_to_quorum_leader, Some(100));
}

#[test]
fn leaderless_windows_and_overlaps() {
    let mut f = Feed::new();
    f.read(0, 1, "?", 0)
        .read(10, 1, "L", 1)
        .read(20, 2, "F1", 1)
        .read(30, 3, "L", 2)
        .read(40, 3, "?", 2)
        .read(50, 2, "?", 1);
    let done = f.view.finish();
    let windows: Vec<(u64, u64, bool)> = done
        .windows
        .iter()
        .map(|w| (w.start_ns / MS, w.end_ns / MS, w.open_at_end))
        .collect();
    assert_eq!(windows, vec![(0, 20, false), (50, 50, true)]);
    let overlaps: Vec<(u64, u64, usize)> = done
        .overlaps
        .iter()
        .map(|o| (o.start_ns / MS, o.end_ns / MS, o.leaders.len()))
        .collect();
    assert_eq!(overlaps, vec![(30, 40, 2)]);
}

#[test]
fn clock_faults_pair_with_their_reset_and_unknown_events_pass() {
    let mut f = settled();
    f.nemesis(100, "clock", r#"{"nodes":["n2"],"mode":"bump","offset_ms":5000}"#)
        .nemesis(150, "packet", r#"{"nodes":["n3"]}"#)
        .line(r#"{"index":9,"time":160000000,"process":"x","type":"info","f":"future-thing","value":{"a":[1]}}"#.into())
        .nemesis(180, "heal", r#"{"nodes":["n3"],"undoes":"packet"}"#)
        .nemesis(200, "clock", r#"{"nodes":["n2"],"mode":"reset"}"#);
    let i = &f.view.intervals()[0];
    assert_eq!((i.kind, i.end_ns), (FaultKind::Clock, Some(200 * MS)));
    // A packet fault pairs with the heal that says it undoes packets.
    let p = &f.view.intervals()[1];
    assert_eq!((p.kind, p.end_ns), (FaultKind::Packet, Some(180 * MS)));
    assert_eq!(f.view.active_faults().count(), 0);
}

fn group(f: &Feed) -> Vec<&str> {
    let g = f.view.calm_group();
    (0..f.view.nodes().len())
        .filter(|i| g & (1 << i) != 0)
        .map(|i| f.view.nodes()[i].name.as_str())
        .collect()
}

#[test]
fn the_calm_group_is_a_clean_quorum_under_no_fault_but_clock_steps() {
    let mut f = Feed::new();
    // Nobody answered yet: no group.
    assert!(group(&f).is_empty());
    f.read(1, 1, "?", 0).read(2, 2, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2"]);
    f.read(3, 3, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    // A clock step touches nothing (the servers time on the monotonic clock)...
    f.nemesis(
        10,
        "clock",
        r#"{"nodes":["n2"],"mode":"bump","offset_ms":5000}"#,
    );
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    // ... unless the run fakes the monotonic clock too.
    f.view.set_clock_faults_touch(true);
    assert_eq!(group(&f), vec!["n1", "n3"]);
    f.view.set_clock_faults_touch(false);
    // A killed node is out until it answers again after its restart.
    f.nemesis(20, "kill", r#"{"nodes":["n3"]}"#);
    assert_eq!(group(&f), vec!["n1", "n2"]);
    f.nemesis(30, "start", r#"{"nodes":["n3"]}"#);
    assert_eq!(group(&f), vec!["n1", "n2"]);
    f.read(31, 3, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    // A packet fault touches its nodes: one of three left, no quorum.
    f.nemesis(40, "packet", r#"{"nodes":["n1","n2"]}"#);
    assert!(group(&f).is_empty());
    f.nemesis(50, "heal", r#"{"nodes":["n1","n2"],"undoes":"packet"}"#);
    // A clean cut: the majority side is calm.
    f.nemesis(
        60,
        "partition",
        r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#,
    );
    assert_eq!(group(&f), vec!["n2", "n3"]);
    f.nemesis(70, "heal", r#"{"nodes":["n1","n2","n3"]}"#);
    // A bridge: n2 hears both, n1 and n3 do not hear each other. {n1,n2} is connected
    // but n3 is cut from only part of it: not cleanly separated, no calm group.
    f.nemesis(
        80,
        "partition",
        r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n3"],"n3":["n1"]}}"#,
    );
    assert!(group(&f).is_empty());
}

/// A node that hears the whole group and also the nodes cut off from it relays their votes:
/// the group elects a leader it cannot reach, again and again (simulated seed 707: n2 heard
/// n1, n3, n4 and n5; n5 led; the three followed it and went LOOKING for 14 s). Such a group
/// is not calm; with the bridging node down, it is.
#[test]
fn a_group_beside_a_bridge_to_the_other_side_is_not_calm() {
    let mut f = Feed::new();
    for n in 1..=5 {
        f.read(n, n, "?", 0);
    }
    assert_eq!(group(&f), vec!["n1", "n2", "n3", "n4", "n5"]);
    f.nemesis(
        100,
        "partition",
        r#"{"nodes":["n1","n3","n4","n5"],"drops":{"n1":["n5"],"n3":["n5"],"n4":["n5"],"n5":["n1","n3","n4"]}}"#,
    );
    assert!(group(&f).is_empty(), "{:?}", group(&f));
    f.nemesis(200, "kill", r#"{"nodes":["n2"]}"#);
    assert_eq!(group(&f), vec!["n1", "n3", "n4"]);
}

#[test]
fn a_faked_monotonic_clock_holds_its_node_for_the_fault_s_lead_after_the_reset() {
    // A clock fault on n2 from `at` ms, reset at `reset` ms.
    fn skew_n2(f: &mut Feed, at: u64, reset: u64, how: &str) {
        f.nemesis(at, "clock", &format!(r#"{{"nodes":["n2"],{how}}}"#))
            .nemesis(reset, "clock", r#"{"nodes":["n2"],"mode":"reset"}"#);
    }
    let mut f = Feed::new();
    f.view.set_clock_faults_touch(true);
    f.read(1, 1, "?", 0).read(2, 2, "?", 0).read(3, 3, "?", 0);
    // Ahead by 500 ms, reset at 20 ms: n2's timers may stall until 520 ms.
    skew_n2(&mut f, 10, 20, r#""mode":"bump","offset_ms":500"#);
    f.read(400, 1, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n3"]);
    f.read(600, 1, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    // The stall of the group without n2 ended when its lead ran out, not at the reset.
    let held = f.view.stalls().iter().find(|s| s.group == ["n1", "n3"]);
    assert_eq!(held.map(|s| s.end_ns), Some(600 * MS));
    // A clock set back is moved forward by its reset: no lead.
    skew_n2(&mut f, 700, 710, r#""mode":"bump","offset_ms":-5000"#);
    f.read(720, 1, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
    // A rate of 3 for 100 ms puts the clock 200 ms ahead.
    skew_n2(&mut f, 800, 900, r#""mode":"rate","factor":3.0"#);
    f.read(1050, 1, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n3"]);
    f.read(1150, 1, "?", 0);
    assert_eq!(group(&f), vec!["n1", "n2", "n3"]);
}

#[test]
fn stalls_measure_a_calm_group_without_a_leader_and_name_a_deposed_one() {
    let mut f = settled();
    // Calm and led from 12 ms: n1 loses its quorum at 6100 ms (n2 alone looking leaves
    // it two of three), n2 leads epoch 2 at 6310.
    f.read(6000, 2, "?", 1)
        .read(6100, 3, "?", 1)
        .read(6200, 1, "?", 1)
        .read(6250, 2, "?", 1)
        .read(6300, 2, "L", 2)
        .read(6310, 3, "F2", 2);
    // A kill: the two left elect within 2 s; the group changed, so nothing was deposed.
    f.nemesis(7000, "kill", r#"{"nodes":["n2"]}"#)
        .read(8000, 1, "L", 3)
        .read(9000, 3, "F1", 3);
    let done = f.view.finish();
    type Leader = Option<(u64, u64)>;
    let stalls: Vec<(u64, u64, Leader, Leader)> = done
        .stalls
        .iter()
        .filter(|s| s.ms > 0)
        .map(|s| (s.start_ns / MS, s.ms, s.before, s.after))
        .collect();
    assert_eq!(
        stalls,
        vec![
            (6100, 210, Some((1, 1)), Some((2, 2))),
            (7000, 2000, None, Some((1, 3)))
        ]
    );
    let deposed = done
        .stalls
        .iter()
        .find(|s| s.start_ns == 6100 * MS)
        .unwrap();
    assert_eq!(deposed.calm_for_ms, 6100 - 12);
    assert_eq!(deposed.group, vec!["n1", "n2", "n3"]);
    assert!(deposed.fewest_reads >= 1);
}
/// A fault's start that takes seconds (iptables under load) is under way from its invoke:
/// the leaderless seconds before its rules are all in place are no calm group's stall.
#[test]
fn no_group_is_calm_while_a_fault_start_is_under_way() {
    let mut f = settled();
    let halves = r#"{"nodes":["n1","n2","n3"],"drops":{"n1":["n2","n3"],"n2":["n1"],"n3":["n1"]}}"#;
    f.nemesis_event(1000, "invoke", "partition", halves);
    // The leader loses its quorum as the rules go in; they are all in at 6 s.
    f.read(1100, 1, "?", 1)
        .read(1200, 2, "?", 1)
        .read(1300, 3, "?", 1);
    assert_eq!(
        f.view.calm_group(),
        0,
        "a start under way leaves no group calm"
    );
    f.read(5900, 2, "?", 1);
    f.nemesis(6000, "partition", halves)
        .read(6100, 2, "?", 1)
        .read(6200, 3, "?", 1);
    f.nemesis(7000, "heal", r#"{"nodes":["n1","n2","n3"]}"#)
        .read(7100, 2, "L", 2)
        .read(7200, 3, "F2", 2)
        .read(7300, 1, "F2", 2);
    let done = f.view.finish();
    // Only the stalls once the partition was in place (the majority's own second, then
    // the healed group's election).
    let stalls: Vec<_> = done.stalls.iter().filter(|s| s.ms > 0).collect();
    assert!(!stalls.is_empty());
    assert!(stalls.iter().all(|s| s.start_ns >= 6000 * MS), "{stalls:?}");
}

/// A calm member LOOKING beside the group's standing leader is a stray until it follows;
/// one cut off by a partition is not (it cannot join); after the heal it is again, until
/// it follows.
#[test]
fn strays_are_calm_members_looking_beside_a_standing_leader() {
    let mut f = settled();
    f.read(1000, 3, "?", 1)
        .read(1010, 1, "L", 1)
        .read(1020, 2, "F1", 1)
        .read(2500, 3, "?", 1)
        .read(4000, 3, "F1", 1);
    f.nemesis(
        5000,
        "partition",
        r#"{"nodes":["n1","n2","n3"],"drops":{"n3":["n1","n2"],"n1":["n3"],"n2":["n3"]}}"#,
    );
    f.read(5100, 3, "?", 1).read(9000, 3, "?", 1);
    f.nemesis(9500, "heal", r#"{"nodes":["n1","n2","n3"]}"#)
        .read(9550, 3, "?", 1)
        .read(9600, 3, "F1", 1);
    assert_eq!(
        stray_rows(f),
        vec![
            ("n3".into(), "LOOKING".into(), 1000, 3000, 1, (1, 1)),
            ("n3".into(), "LOOKING".into(), 9500, 100, 1, (1, 1))
        ]
    );
}

/// A stray as the tests compare it: node, what its first read showed, start (ms), length
/// (ms), reads, leader.
type StrayRow = (String, String, u64, u64, u32, (u64, u64));

/// The strays of the history fed so far, ended now.
fn stray_rows(f: Feed) -> Vec<StrayRow> {
    let done = f.view.finish();
    let row = |s: &crate::history::view::Stray| {
        let at = s.start_ns / MS;
        (s.node.clone(), s.shown.clone(), at, s.ms, s.reads, s.leader)
    };
    done.strays.iter().map(row).collect()
}

/// A calm member FOLLOWING the standing leader in discovery or sync, LOOKING for a moment
/// between its attempts, is one stray until it serves in broadcast (a server that cannot
/// rejoin); while the leader is itself in discovery no leader stands, and a new term opens a
/// new stray.
#[test]
fn strays_count_members_stuck_in_discovery_or_sync_beside_a_standing_leader() {
    let mut f = settled();
    f.read(1000, 3, "D1", 1)
        .read(1500, 3, "?", 1)
        .read(1600, 3, "S1", 1)
        .read(3000, 3, "D1", 1)
        .read(4000, 3, "F1", 1);
    f.read(5000, 1, "L-discovery", 1)
        .read(5010, 3, "D1", 1)
        .read(8000, 2, "D1", 1);
    f.read(9000, 1, "L", 2)
        .read(9010, 2, "F1", 2)
        .read(9500, 3, "F1", 2);
    let discovery = "FOLLOWING n1 in discovery (epoch 1)".to_string();
    assert_eq!(
        stray_rows(f),
        vec![
            ("n3".into(), discovery.clone(), 1000, 3000, 3, (1, 1)),
            ("n3".into(), discovery, 9010, 490, 0, (1, 2))
        ]
    );
}

/// A fault ends a reign when it leaves the standing leader without its quorum, at its
/// invoke's time; a leader seen standing again on reads taken after the fault was not ended
/// by it; a fault that leaves the quorum whole, or that failed, ends nothing.
#[test]
fn reigns_name_the_fault_that_ended_each_leadership() {
    let n = |x: u64| format!(r#"{{"nodes":["n{x}"]}}"#);
    let mut f = Feed::of(5);
    f.read(10, 1, "L", 1)
        .read(11, 2, "F1", 1)
        .read(12, 3, "F1", 1);
    f.read(13, 4, "F1", 1).read(14, 5, "F1", 1);
    f.nemesis_event(100, "invoke", "kill", &n(5))
        .nemesis_event(110, "info", "kill", &n(5));
    f.nemesis_event(400, "invoke", "kill", &n(1))
        .read(420, 2, "F1", 1)
        .nemesis_event(450, "info", "kill", &n(1));
    f.read(600, 2, "?", 1)
        .read(601, 3, "?", 1)
        .read(602, 4, "?", 1);
    f.read(900, 2, "L", 2)
        .read(901, 3, "F2", 2)
        .read(902, 4, "F2", 2);
    f.nemesis_event(1000, "invoke", "pause", &n(2))
        .nemesis_event(1005, "info", "pause", &n(2))
        .nemesis(1100, "resume", &n(2));
    f.read(1110, 2, "L", 2)
        .read(1111, 3, "F2", 2)
        .read(1112, 4, "F2", 2);
    f.nemesis_event(1300, "invoke", "kill", &n(2))
        .nemesis_event(1310, "fail", "kill", &n(2));
    let done = f.view.finish();
    let reigns: Vec<(u64, u64, Option<u64>)> = done
        .reigns
        .iter()
        .map(|r| (r.sid, r.epoch, r.ended_by.map(|e| e.at_ns / MS)))
        .collect();
    assert_eq!(reigns, vec![(1, 1, Some(400)), (2, 2, None)]);
}

/// Once the leader reports a reconfig's config, its voters make the quorum: n2 leads three
/// voters left of five with n3, backed, while n4 and n5 (removed, LOOKING) are owed nothing.
#[test]
fn a_leader_is_backed_by_a_quorum_of_its_own_config() {
    let mut f = Feed::of(5);
    let v1 = 1 << 32;
    f.read_under((10, 2, "L", 2), v1, &[1, 2, 3])
        .read_under((11, 3, "F2", 2), v1, &[1, 2, 3])
        .read_under((12, 4, "?", 1), v1, &[1, 2, 3])
        .read_under((13, 5, "?", 1), v1, &[1, 2, 3]);
    assert_eq!(f.leader(0), Some((2, 2)));
    assert_eq!(
        f.view.settled(0).stragglers,
        vec![0],
        "only n1, unread, is owed a rejoin"
    );
    // A removed server's following does not count: n4 and n5 follow n1 under a config
    // without them, and n1 alone is no quorum of its three voters.
    let mut g = Feed::of(5);
    g.read_under((10, 1, "L", 1), v1, &[1, 2, 3])
        .read_under((11, 4, "F1", 1), v1, &[1, 2, 3])
        .read_under((12, 5, "F1", 1), v1, &[1, 2, 3]);
    assert_eq!(g.leader(0), None);
    // Under the static config the same three reads are a quorum of the five.
    let mut h = Feed::of(5);
    h.read(10, 1, "L", 1)
        .read(11, 4, "F1", 1)
        .read(12, 5, "F1", 1);
    assert_eq!(h.leader(0), Some((1, 1)));
}
