//! The simulated network between servers: per directed link, whether packets pass (the
//! partitions a grudge makes, every port or only the quorum port) and how long they take
//! (a base latency, plus what a packet fault adds).
//!
//! Servers talk over TCP, so what a packet fault does to the bytes shows up to fle-node only as
//! time: a lost segment is sent again after a loss probe, then after doubling retransmission
//! timeouts while the retries are lost too, a duplicate is dropped
//! by the receiver's TCP, a reordered one waits for its predecessor. That is what is modelled.

use crate::control::fault::packet::PacketMode;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Which of a server's ports a packet is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Port {
    /// Election notifications (and the controller-side client path shares the host's stack).
    Election,
    /// Zab: the leader's quorum port.
    Quorum,
    /// HTTP between servers (a follower forwarding a client's write).
    Client,
}

/// A server's first retransmission timeout (Linux's TCP_RTO_MIN is 200 ms).
const RTO_NS: u64 = 200_000_000;

/// Linux's tail loss probe (RACK-TLP, RFC 8985; `tcp_schedule_loss_probe`): a lost segment is
/// sent again after about two round trips, at least 10 ms, before any retransmission timeout.
/// On the sub-millisecond links here that floor is what a first loss costs; only a lost probe
/// waits for the 200 ms timeout. (Charging every loss 200 ms made a 30 % lossy link far slower
/// in simulation than on real processes: a sync that real servers finished in 1.7 s timed out.)
const TLP_NS: u64 = 10_000_000;

/// Linux's first SYN retransmission timeout (TCP_TIMEOUT_INIT, RFC 6298's 1 s), doubled at
/// each retransmission.
const SYN_RTO_NS: u64 = 1_000_000_000;

/// Linux's `net.ipv4.tcp_syn_retries` default: a connect whose SYNs are all dropped fails
/// after 6 retransmissions, 127 s after the first SYN.
const SYN_RETRIES: u32 = 6;

/// How long after its first SYN a connect whose SYNs were all dropped fails (ETIMEDOUT).
pub const SYN_GIVE_UP_NS: u64 = SYN_RTO_NS * ((1 << (SYN_RETRIES + 1)) - 1);

/// When a connect whose first SYN went out at `since` sends its next SYN after `now`: at 1,
/// 3, 7, 15, 31 and 63 s after the first (a partition drops SYNs without a word, so the
/// kernel retransmits on its own clock); None once its retransmissions are spent. A dial
/// that meets a healed link connects at the next of these, not at once.
pub fn next_syn(since: u64, now: u64) -> Option<u64> {
    (1..=SYN_RETRIES)
        .map(|k| since + SYN_RTO_NS * ((1u64 << k) - 1))
        .find(|&at| at > now)
}

#[derive(Debug, Default)]
pub struct Net {
    /// Per fault in force (its id): (from, to) dropped, `true` when only the quorum port's.
    cuts: BTreeMap<u64, BTreeMap<(u64, u64), bool>>,
    /// Per fault in force: (from, to) and what a packet fault does on that link.
    degraded: BTreeMap<u64, BTreeMap<(u64, u64), PacketMode>>,
}

impl Net {
    /// Fault `id` drops every packet `from` -> `to` (`quorum_only`: only Zab's).
    pub fn cut(&mut self, id: u64, from: u64, to: u64, quorum_only: bool) {
        self.cuts
            .entry(id)
            .or_default()
            .insert((from, to), quorum_only);
    }

    /// Fault `id` slows `from` -> `to` as `mode` does.
    pub fn degrade(&mut self, id: u64, from: u64, to: u64, mode: PacketMode) {
        self.degraded
            .entry(id)
            .or_default()
            .insert((from, to), mode);
    }

    /// Fault `id` is undone.
    pub fn heal(&mut self, id: u64) {
        self.cuts.remove(&id);
        self.degraded.remove(&id);
    }

    /// Whether a packet `from` -> `to` for `port` passes now.
    pub fn passes(&self, from: u64, to: u64, port: Port) -> bool {
        self.cuts.values().all(|c| match c.get(&(from, to)) {
            None => true,
            Some(quorum_only) => *quorum_only && port != Port::Quorum,
        })
    }

    /// How long one message takes `from` -> `to`, in ns: a LAN's latency plus, on a degraded
    /// link, the time TCP needs to get it through.
    pub fn latency(&self, from: u64, to: u64, rng: &mut ChaCha8Rng) -> u64 {
        let base = rng.gen_range(100_000..400_000);
        let mode = self.degraded.values().find_map(|d| d.get(&(from, to)));
        let extra = match mode {
            None => 0,
            Some(PacketMode::Delay {
                delay_ms,
                jitter_ms,
            }) => {
                let jitter = if *jitter_ms > 0 {
                    rng.gen_range(0..=2 * jitter_ms) as i64 - *jitter_ms as i64
                } else {
                    0
                };
                ((*delay_ms as i64 + jitter).max(0) as u64) * 1_000_000
            }
            Some(PacketMode::Loss { percent }) => {
                // The first loss costs the loss probe; each lost retry after it a doubling
                // retransmission timeout.
                let p = (percent / 100.0).clamp(0.0, 0.99);
                let (mut extra, mut wait, mut rto) = (0, TLP_NS, RTO_NS);
                while rng.gen_bool(p) && extra < 60 * RTO_NS {
                    extra += wait;
                    (wait, rto) = (rto, rto * 2);
                }
                extra
            }
            Some(PacketMode::Reorder { percent, delay_ms })
                if rng.gen_bool((percent / 100.0).clamp(0.0, 1.0)) =>
            {
                delay_ms * 1_000_000
            }
            Some(PacketMode::Reorder { .. }) => 0,
            // A duplicate is dropped by the receiving TCP.
            Some(PacketMode::Duplicate { .. }) => 0,
            // Refused before a run starts (`super::cannot_model`).
            Some(PacketMode::Bandwidth { .. }) => 0,
        };
        base + extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_dropped_syn_is_sent_again_at_1_3_7_15_31_and_63_s_and_the_connect_fails_at_127() {
        let since = 5 * S;
        let mut sent = Vec::new();
        let mut now = since;
        while let Some(at) = next_syn(since, now) {
            assert!(at > now);
            sent.push((at - since) / S);
            now = at;
        }
        assert_eq!(sent, [1, 3, 7, 15, 31, 63]);
        assert_eq!(SYN_GIVE_UP_NS / S, 127);
        // From inside an interval: the next retransmission, not the one before.
        assert_eq!(next_syn(since, since + 2 * S), Some(since + 3 * S));
        assert_eq!(next_syn(since, since + 3 * S), Some(since + 7 * S));
    }

    /// Under loss a message costs nothing extra, or a loss probe (10 ms), then 200, 400, ...
    /// ms more for each lost retry: about 70 % of them nothing at 30 % loss, 21 % 10 ms.
    #[test]
    fn a_lost_segment_costs_a_loss_probe_then_doubling_timeouts() {
        let mut net = Net::default();
        net.degrade(1, 1, 2, PacketMode::Loss { percent: 30.0 });
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        let ms = 1_000_000;
        // 0, 10, 210, 610, 1,410, ... ms, up to the 12 s the retries give up at.
        let mut costs = vec![0, 10 * ms];
        while costs.len() < 9 {
            let (last, rto) = (costs[costs.len() - 1], (200 * ms) << (costs.len() - 2));
            costs.push(last + rto);
        }
        let mut counts = vec![0usize; costs.len()];
        for _ in 0..10_000 {
            let took = net.latency(1, 2, &mut rng);
            // The link's own latency is under a millisecond; the rest is what the loss cost.
            let extra = took - took % ms;
            let i = (costs.iter())
                .position(|c| *c == extra)
                .unwrap_or_else(|| panic!("{took} ns is no loss probe or timeout sum"));
            counts[i] += 1;
        }
        assert!((6_700..7_300).contains(&counts[0]), "{counts:?}");
        assert!((1_800..2_400).contains(&counts[1]), "{counts:?}");
        assert!(counts[2] > 400 && counts[3] > 80, "{counts:?}");
    }
}
