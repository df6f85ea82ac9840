//! The follow back-off: how long a server waits before dialing the leader it just elected,
//! after follow attempts that failed quickly (ZooKeeper's Learner backs off the same way).
//! Its own module so that the server loop and the simulator (`fle-chaos simulate`) run the
//! same rule.

use std::time::Duration;

use tokio::time::Instant;

use crate::zab::ZabConfig;

/// Follow attempts that failed before broadcast, in a row (issue 18's re-follow storm: a
/// leader that refuses or drops us at once, and an election that names it again a millisecond
/// later). Like ZooKeeper's Learner, the next attempt waits (tickTime doubling up to
/// tickTime·initLimit) and the loop is logged once, then at 2, 4, 8, ... failures with the count.
///
/// Only a quick end is a failure: an attempt that waited syncLimit·tickTime or more before it
/// ended (a leader paused or cut off while we synced, given up on after initLimit) was paced by
/// its own wait, and a back-off after it only delays the next election's quorum (the paused
/// leader's tail: a second or more, in whole ticks, after a pause caught a follower mid-sync).
/// Any broadcast, leading too, ends a streak.
#[derive(Debug, Default)]
pub struct FollowStreak {
    broadcast: bool,
    /// When the current follow attempt dials its leader (after its back-off); None while
    /// leading.
    dials_at: Option<Instant>,
    failures: u32,
}

impl FollowStreak {
    pub fn started(&mut self, following: bool, dials_at: Instant) {
        self.broadcast = false;
        self.dials_at = following.then_some(dials_at);
    }

    pub fn reached_broadcast(&mut self) {
        if self.dials_at.is_some() && !self.broadcast && self.failures > 1 {
            tracing::info!(
                failed_attempts = self.failures,
                "following works again after failed attempts"
            );
        }
        self.broadcast = true;
        self.failures = 0;
    }

    /// Whether lines about this attempt are worth logging (not while a storm repeats itself).
    pub fn loud(&self) -> bool {
        self.failures < 2 || self.failures.is_power_of_two()
    }

    pub fn role_ended(&mut self, sid: u64, reason: &str, now: Instant, zab: &ZabConfig) {
        let (tick, init_limit) = (zab.tick, zab.init_limit);
        // A follow attempt (never a term of leading) that ended sooner than a silent leader is
        // given up on.
        let quick = self
            .dials_at
            .is_some_and(|at| now.saturating_duration_since(at) < tick * zab.sync_limit);
        if !self.broadcast && quick {
            self.failures += 1;
        }
        if self.failures >= 2 && self.loud() {
            tracing::warn!(
                sid,
                failed_attempts = self.failures,
                retry_after_ms = self.delay(tick, init_limit).as_millis() as u64,
                reason = %reason,
                "following keeps failing before sync; backing off (logged again at twice the count)"
            );
        } else if self.loud() {
            tracing::info!(sid, reason = %reason, "role ended");
        } else {
            tracing::debug!(sid, reason = %reason, "role ended");
        }
    }

    /// Wait before the next follow attempt: none after a success, then tickTime doubling.
    pub fn delay(&self, tick: Duration, init_limit: u32) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => (tick * 2u32.saturating_pow(n - 1)).min(tick * init_limit.max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn zab() -> ZabConfig {
        // tickTime 200 ms, initLimit 10, syncLimit 5: the side-by-side bench's settings.
        ZabConfig::new(
            1,
            BTreeMap::new(),
            Default::default(),
            Duration::from_millis(200),
            10,
            5,
        )
    }

    /// A follow attempt that starts now, dials at once and ends `after` later.
    fn attempt(streak: &mut FollowStreak, after: Duration) {
        let zab = zab();
        let dials_at = Instant::now() + streak.delay(zab.tick, zab.init_limit);
        streak.started(true, dials_at);
        streak.role_ended(2, "test", dials_at + after, &zab);
    }

    #[test]
    fn a_leader_that_drops_us_at_once_backs_the_next_attempts_off() {
        let (zab, mut streak) = (zab(), FollowStreak::default());
        attempt(&mut streak, Duration::from_millis(5));
        assert_eq!(streak.delay(zab.tick, zab.init_limit), zab.tick);
        attempt(&mut streak, Duration::from_millis(5));
        attempt(&mut streak, Duration::from_millis(5));
        assert_eq!(streak.delay(zab.tick, zab.init_limit), zab.tick * 4);
    }

    #[test]
    fn a_leader_given_up_on_after_init_limit_costs_the_next_attempt_no_wait() {
        let (zab, mut streak) = (zab(), FollowStreak::default());
        attempt(&mut streak, zab.tick * zab.init_limit);
        assert_eq!(streak.delay(zab.tick, zab.init_limit), Duration::ZERO);
    }

    #[test]
    fn leading_to_broadcast_ends_a_streak() {
        let (zab, mut streak) = (zab(), FollowStreak::default());
        attempt(&mut streak, Duration::from_millis(5));
        attempt(&mut streak, Duration::from_millis(5));
        streak.started(false, Instant::now());
        streak.reached_broadcast();
        streak.role_ended(1, "paused", Instant::now(), &zab);
        assert_eq!(streak.delay(zab.tick, zab.init_limit), Duration::ZERO);
    }
}
