//! availability (judged within the recovery checker, which owns the view it asks): whenever a
//! calm group stands (a quorum of nodes up, answering, under no fault but clock steps,
//! mutually connected and cleanly separated from the rest: `View::calm_group`), a
//! quorum-backed leader exists within a bound; and no member of it stays out of broadcast
//! beside that leader past the stall bound, whatever it shows (LOOKING, or FOLLOWING it in
//! discovery or sync: a node that cannot join or rejoin); and after the final heal every node
//! that is up rejoins that leader within a bound; and a calm group that stood for the settle
//! time does not keep losing its leaders to new elections (leaders deposed while nothing
//! touched their quorum, `MIN_DEPOSED` times in one calm stretch). Liveness, not safety: the
//! seeded bugs that stop a cluster electing (a blocking connect, a deaf receiver, wall-clock
//! timeouts, a node that cannot join) leave every safety checker valid.
//!
//! Both bounds come from the run's own settings (test.json), never from this machine: see
//! [`stall_bound_ms`] and [`rejoin_bound_ms`].

use super::finding::{EvRef, Item};
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::view::{Stall, Stray};

/// A stall seen through fewer successful reads of some group member than this cannot be told
/// from observers that could not reach the nodes: unknown, not invalid.
pub const MIN_READS: u32 = 2;

/// Depositions in one calm stretch that make it invalid. One is possible on a correct
/// cluster whose host starves a process for syncLimit ticks (seen once in 11 runs of `mixed`
/// on the loaded 2-core machine); a cluster that deposes healthy leaders again and again
/// while nothing touches it does so itself.
pub const MIN_DEPOSED: usize = 3;

/// The longest a calm group may go without a quorum-backed leader: a follower notices a
/// silent leader after syncLimit ticks; the election waits finalizeWait, and on ZooKeeper its
/// notification back-off ([`election_backoff_ms`]); a dial may take the connect timeout;
/// followers get initLimit ticks to connect and sync; a read may be up to the observers' read
/// timeout old at either end of the stall.
pub fn stall_bound_ms(info: &TestInfo) -> u64 {
    let ticks = (info.sync_limit as u64 + info.init_limit as u64) * info.tick_ms;
    let read = info.settings.status_timeout_ms.unwrap_or(500);
    ticks
        + info.finalize_wait_ms()
        + election_backoff_ms(info)
        + connect_timeout_ms(info)
        + 2 * read
}

/// How much longer an election may run than its messages take, because of Fast Leader
/// Election's notification back-off on ZooKeeper: a LOOKING server whose vote is worse than
/// its peers' in their own round gets no answer (ZooKeeper 3.8 answers only a lower round, or
/// once it is no longer LOOKING), so it learns the winning vote only at a peer's next re-send,
/// and its peers learn that it changed only at its own next one. A notification timeout
/// doubles from finalizeWait with every silent period, so a server LOOKING for t re-sends
/// within t + finalizeWait, and the last member of a stalled group goes LOOKING at most
/// (syncLimit + initLimit) ticks in: two such waits. fle-node answers such a vote at once
/// (`fle_node::election`, since a correct 7-node run stalled 4.96 s this way on 2026-12-04,
/// and simulated seeds 1251, 2795 and 4238 did), so it gets none.
pub fn election_backoff_ms(info: &TestInfo) -> u64 {
    if info.target != "zookeeper" {
        return 0;
    }
    let ticks = (info.sync_limit as u64 + info.init_limit as u64) * info.tick_ms;
    2 * (ticks + info.finalize_wait_ms())
}

/// The servers' election connect timeout: ZooKeeper's cnxTimeout (5 s unless the run set
/// `cnxTimeout`), fle-node's own.
fn connect_timeout_ms(info: &TestInfo) -> u64 {
    if info.target == "zookeeper" {
        let default = fle_node::peers::ZOOKEEPER_CONNECT_TIMEOUT.as_millis() as u64;
        info.zookeeper_ms("cnxTimeout", default)
    } else {
        fle_node::peers::CONNECT_TIMEOUT.as_millis() as u64
    }
}

/// How long after the final heal every node that is up may take to rejoin: the recovery
/// bound (a quorum-backed leader), then initLimit ticks for the last follower to sync, plus
/// the notification back-off a node cut off until the heal may still be waiting out (on
/// ZooKeeper up to maxNotificationInterval, which covers [`election_backoff_ms`] too).
pub fn rejoin_bound_ms(recovery_bound_ms: u64, info: &TestInfo) -> u64 {
    recovery_bound_ms
        + info.init_limit as u64 * info.tick_ms
        + notification_backoff_ms(&info.target, &info.settings.zookeeper_config)
}

/// ZooKeeper's `maxNotificationInterval` when no run says otherwise (FastLeaderElection).
pub const ZOOKEEPER_MAX_NOTIFICATION_MS: u64 = 60_000;
/// The zoo.cfg key that sets it (ZooKeeper reads it as `zookeeper.fastleader.maxNotificationInterval`).
pub const ZOOKEEPER_MAX_NOTIFICATION_KEY: &str = "fastleader.maxNotificationInterval";

/// The longest a correct LOOKING server may wait before it re-sends its vote and re-dials the
/// peers it has no connection to, after a heal: on ZooKeeper its notification interval, which
/// doubles while it is cut off up to `maxNotificationInterval` (60 s unless the run set it)
/// and which nothing resets when a partition heals; fle-node re-dials a down link within a
/// second (`fle_node::peers`), which the bounds' other terms cover. One back-off, so one
/// definition for every bound that waits on it (strays, the final rejoin, the settle wait).
pub fn notification_backoff_ms(
    target: &str,
    zookeeper_config: &std::collections::BTreeMap<String, String>,
) -> u64 {
    if target != "zookeeper" {
        return 0;
    }
    crate::history::test_info::zookeeper_ms(
        zookeeper_config,
        ZOOKEEPER_MAX_NOTIFICATION_KEY,
        ZOOKEEPER_MAX_NOTIFICATION_MS,
    )
}

/// How long a calm-group member may stay out of broadcast beside the group's standing leader
/// during the run (LOOKING, or FOLLOWING it in discovery or sync): as long as the whole group
/// may go without a leader (`stall_ms`: noticing a silent leader, electing, connecting and
/// syncing, all of which a member joining a standing leader does at most once), plus its
/// notification back-off.
pub fn stray_bound_ms(stall_ms: u64, info: &TestInfo) -> u64 {
    stall_ms + notification_backoff_ms(&info.target, &info.settings.zookeeper_config)
}

/// Violations (strays at least `bound_ms` long, each read apart from the leader often enough)
/// and gaps (as long, too few reads) among `strays` that began before `until_ns` (the final
/// heal: after it, the final rejoin check judges the same nodes).
pub fn judge_strays(strays: &[Stray], bound_ms: u64, until_ns: u64) -> (Vec<Item>, Vec<Item>) {
    let (mut violations, mut gaps) = (Vec::new(), Vec::new());
    for s in strays
        .iter()
        .filter(|s| s.ms >= bound_ms && s.start_ns < until_ns)
    {
        let (l, e) = s.leader;
        let evidence = vec![
            EvRef::new(
                s.start_pos,
                format!("{} {} beside n{l} (epoch {e}) from here", s.node, s.shown),
            ),
            EvRef::new(s.end_pos, "until here"),
        ];
        let what = format!(
            "{} did not serve in broadcast under n{l} (epoch {e}) for {} ms{} from {} (first read {}) while n{l} led a calm quorum it belonged to (up, connected to every member, under no fault but clock steps): it could not join a standing leader (bound {bound_ms} ms)",
            s.node,
            s.ms,
            if s.open_at_end { ", until the history ends," } else { "" },
            moment(s.start_ns),
            s.shown,
        );
        if s.reads >= MIN_READS {
            violations.push((format!("{what}."), evidence));
        } else {
            gaps.push((
                format!(
                    "{what}, but it was read apart from it only {} time(s) then.",
                    s.reads
                ),
                evidence,
            ));
        }
    }
    (violations, gaps)
}

/// Violations (stalls at least `bound_ms` long, each member read often enough) and gaps
/// (as long, too few reads) among `stalls`.
pub fn judge_stalls(stalls: &[Stall], bound_ms: u64, settle_ms: u64) -> (Vec<Item>, Vec<Item>) {
    let (mut violations, mut gaps) = (Vec::new(), Vec::new());
    let deposed: Vec<&Stall> = stalls
        .iter()
        .filter(|s| {
            s.ms < bound_ms
                && s.calm_for_ms >= settle_ms
                && matches!((s.before, s.after), (Some(b), Some(a)) if a != b)
        })
        .collect();
    // Per calm stretch (the group and when it formed), in history order.
    let mut stretches: Vec<(u64, &[String], Vec<&Stall>)> = Vec::new();
    for s in deposed {
        let since = s.calm_since_ns;
        match stretches
            .iter_mut()
            .find(|(t, g, _)| *t == since && *g == s.group.as_slice())
        {
            Some((_, _, v)) => v.push(s),
            None => stretches.push((since, &s.group, vec![s])),
        }
    }
    for (_, _, all) in stretches.iter().filter(|(_, _, v)| v.len() >= MIN_DEPOSED) {
        let s = all[0];
        let (b, a) = (s.before.expect("matched"), s.after.expect("matched"));
        let evidence = vec![
            EvRef::new(
                s.start_pos,
                format!("n{} (epoch {}) lost its quorum here", b.0, b.1),
            ),
            EvRef::new(s.end_pos, format!("n{} (epoch {}) elected", a.0, a.1)),
        ];
        let what = format!(
            "{} healthy leaders were deposed while nothing touched their quorum (at least {MIN_DEPOSED} make it invalid); the first: {} (a quorum) had stood up, connected and under no fault but clock steps for {} ms when their leader n{} (epoch {}) lost its quorum at {}, and they elected n{} (epoch {}) {} ms later (settle time {settle_ms} ms)",
            all.len(),
            s.group.join(", "),
            s.calm_for_ms,
            b.0,
            b.1,
            moment(s.start_ns),
            a.0,
            a.1,
            s.ms
        );
        let fewest = all.iter().map(|s| s.fewest_reads).min().unwrap_or(0);
        if fewest >= MIN_READS {
            violations.push((format!("{what}."), evidence));
        } else {
            gaps.push((
                format!("{what}, but some of them were read only {fewest} time(s) then."),
                evidence,
            ));
        }
    }
    for s in stalls.iter().filter(|s| s.ms >= bound_ms) {
        let evidence = vec![
            EvRef::new(
                s.start_pos,
                "the calm group stood without a quorum-backed leader from here",
            ),
            EvRef::new(s.end_pos, "until here"),
        ];
        let what = format!(
            "{} (a quorum) were up, connected and under no fault but clock steps from {} for {} ms{} with no quorum-backed leader (bound {bound_ms} ms)",
            s.group.join(", "),
            moment(s.start_ns),
            s.ms,
            if s.open_at_end { ", until the history ends," } else { "" }
        );
        if s.fewest_reads >= MIN_READS {
            violations.push((format!("{what}."), evidence));
        } else {
            gaps.push((
                format!("{what}, but some of them were read only {} time(s) then: the observers may not have seen a leader that existed.", s.fewest_reads),
                evidence,
            ));
        }
    }
    (violations, gaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn stall(start_ms: u64, ms: u64, reads: u32, calm_for_ms: u64) -> Stall {
        Stall {
            start_ns: start_ms * MS,
            end_ns: (start_ms + ms) * MS,
            ms,
            group: vec!["n1".into(), "n2".into(), "n3".into()],
            fewest_reads: reads,
            calm_for_ms,
            calm_since_ns: (start_ms - calm_for_ms) * MS,
            before: None,
            after: None,
            open_at_end: false,
            start_pos: 0,
            end_pos: 1,
        }
    }

    #[test]
    fn a_long_stall_is_invalid_unless_too_few_reads_saw_it() {
        let (bad, unsure) = judge_stalls(&[stall(0, 4699, 50, 0)], 4700, 4700);
        assert!(bad.is_empty() && unsure.is_empty());
        let (bad, unsure) = judge_stalls(&[stall(0, 4700, 50, 0)], 4700, 4700);
        assert_eq!((bad.len(), unsure.len()), (1, 0), "{bad:?}");
        let (bad, unsure) = judge_stalls(&[stall(0, 9000, MIN_READS - 1, 0)], 4700, 4700);
        assert_eq!((bad.len(), unsure.len()), (0, 1), "{unsure:?}");
    }

    /// The stall of a correct 7-node run of 2026-12-04 (tick 200 ms, syncLimit 5, initLimit
    /// 10): the leader cut off at 161.256 s; n1 LOOKING after syncLimit, n4 (syncing) after
    /// initLimit, n4's worse vote unanswered in the round until n1's re-send (1.6 s), n1
    /// elected without n4 following, n4 told of it at its own re-send (1.4 s later): 4959 ms.
    /// ZooKeeper 3.8 elects so, and its bound admits it; fle-node answers a worse vote at once
    /// and keeps the 4.7 s bound; one several times longer fails either way.
    #[test]
    fn zookeeper_s_notification_back_off_is_in_its_stall_bound() {
        let info: TestInfo = serde_json::from_value(serde_json::json!({
            "name": "b", "target": "zookeeper", "nodes": ["n1", "n2", "n3", "n4", "n5"],
            "workload": "writes", "nemesis": [], "seed": 1, "time_limit_s": 300.0,
            "tick_ms": 200, "init_limit": 10, "sync_limit": 5,
            "started_at": "2026-12-04T00:00:00Z", "replay_command": "x", "version": "0",
            "settings": {"status_timeout_ms": 500}
        }))
        .unwrap();
        let bound = stall_bound_ms(&info);
        let (bad, _) = judge_stalls(&[stall(161_256, 4959, 50, 0)], bound, bound);
        assert!(bad.is_empty(), "bound {bound} ms: {bad:?}");
        let (bad, _) = judge_stalls(&[stall(161_256, 20_000, 50, 0)], bound, bound);
        assert_eq!(bad.len(), 1, "bound {bound} ms");
        // The rejoin after the final heal waits out the same back-off at least.
        assert!(rejoin_bound_ms(0, &info) >= election_backoff_ms(&info));
        let fle = TestInfo {
            target: "fle".into(),
            ..info
        };
        assert_eq!((election_backoff_ms(&fle), stall_bound_ms(&fle)), (0, 4700));
        let (bad, _) = judge_stalls(&[stall(161_256, 4959, 50, 0)], 4700, 4700);
        assert_eq!(bad.len(), 1, "fle-node is held to 4.7 s");
    }

    #[test]
    fn leaders_deposed_in_one_calm_stretch_count_from_the_third() {
        // A calm stretch from 1000 ms; each stall a new leader (epoch k -> k+1).
        let deposed = |k: u64, calm_since_ms: u64| {
            let start = 10_000 + 1000 * k;
            let mut s = stall(start, 300, 20, start - calm_since_ms);
            s.before = Some((1, k));
            s.after = Some((1, k + 1));
            s
        };
        let two = [deposed(1, 1000), deposed(2, 1000)];
        assert_eq!(judge_stalls(&two, 4700, 4700).0.len(), 0);
        let three = [deposed(1, 1000), deposed(2, 1000), deposed(3, 1000)];
        let (bad, _) = judge_stalls(&three, 4700, 4700);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].0.starts_with("3 healthy leaders"), "{}", bad[0].0);
        // Three, but in different calm stretches: none of them reaches three.
        let apart = [deposed(1, 1000), deposed(2, 5000), deposed(3, 6000)];
        assert_eq!(judge_stalls(&apart, 4700, 4700).0.len(), 0);
        // The same leader and epoch back after a stall (a read timed out): not deposed.
        let mut same = [deposed(1, 1000), deposed(2, 1000), deposed(3, 1000)];
        same[2].after = same[2].before;
        assert_eq!(judge_stalls(&same, 4700, 4700).0.len(), 0);
        // Too soon after the group formed: not counted.
        assert_eq!(judge_stalls(&three, 4700, 60_000).0.len(), 0);
    }
}
