//! The fsync batch of a follower under the seeded ack-before-fsync / epoch-before-txns bugs.
//!
//! ZooKeeper's SyncRequestProcessor does not fsync each txn: it gathers txns and flushes them
//! together (when its queue runs dry, when `zookeeper.maxBatchSize` txns wait, or after
//! `zookeeper.flushDelay`). ZOOKEEPER-3911/4785 are ACKs that left before the batch holding
//! their txns was flushed. The buggy follower here does the same: it ACKs at once, and its txns
//! reach the disk when the batch is initLimit ticks old (as a `flushDelay` of 2 s at the
//! defaults) or holds [`BATCH_TXNS`] txns. So the window in which a power loss takes acknowledged
//! txns is a batch long, not one fsync long. Why that long: a write is lost only if *every*
//! follower that can win the next election lacks it, i.e. none flushed between its proposal and
//! the power loss (~ the commit latency, 150-300 ms here); with a window of one fsync nothing was
//! ever lost, with syncLimit ticks (1 s) 4 of 6 runs caught it; the correct follower never
//! batches (it fsyncs before every ACK).

use std::time::{Duration, Instant};

/// A full batch is flushed at once (ZooKeeper's default `zookeeper.maxBatchSize`).
pub const BATCH_TXNS: usize = 1000;

/// Txns appended and ACKed but not yet fsynced.
#[derive(Debug)]
pub struct Batch {
    max_age: Duration,
    /// When the oldest unflushed txn was appended.
    since: Option<Instant>,
    txns: usize,
}

impl Batch {
    /// A batch flushed once its oldest txn is `max_age` old (the node uses initLimit ticks).
    pub fn new(max_age: Duration) -> Batch {
        Batch {
            max_age,
            since: None,
            txns: 0,
        }
    }

    /// `n` more txns wait for the flush.
    pub fn add(&mut self, n: usize, now: Instant) {
        if n > 0 {
            self.since.get_or_insert(now);
            self.txns += n;
        }
    }

    /// An fsync happened (the batch's or any other): everything appended is durable.
    pub fn flushed(&mut self) {
        self.since = None;
        self.txns = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.since.is_none()
    }

    /// The batch must be flushed now: old enough or full.
    pub fn due(&self, now: Instant) -> bool {
        self.since
            .is_some_and(|t| now.duration_since(t) >= self.max_age || self.txns >= BATCH_TXNS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_due_when_a_tick_old_or_full_and_empty_after_a_flush() {
        let t0 = Instant::now();
        let tick = Duration::from_millis(200);
        let mut b = Batch::new(tick);
        assert!(b.is_empty() && !b.due(t0 + tick * 10), "nothing to flush");
        b.add(0, t0);
        assert!(b.is_empty(), "no txns, no batch");
        b.add(1, t0);
        b.add(1, t0 + tick / 2);
        assert!(!b.due(t0 + tick / 2), "younger than a tick");
        assert!(b.due(t0 + tick), "aged from its oldest txn");
        b.flushed();
        assert!(b.is_empty() && !b.due(t0 + tick * 2));
        b.add(BATCH_TXNS - 1, t0);
        assert!(!b.due(t0));
        b.add(1, t0);
        assert!(b.due(t0), "full");
    }
}
