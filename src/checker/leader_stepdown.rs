//! leader-stepdown: a server that keeps reporting LEADING while no quorum follows it gives up
//! within its Zab timeout. ZooKeeper's leader (and fle-node's) counts the followers it heard
//! from within syncLimit ticks, checks every half tick, and steps down without a quorum; while
//! it waits for followers to sync (a new epoch's sync phase) it gives up after initLimit ticks.
//! A stretch of LEADING reads without a quorum longer than that timeout plus the observers'
//! slack (`CheckOptions::stepdown_slack_ms`) is a zombie leader: invalid. Shorter stretches
//! (a stale leader cut off by a partition until it notices) are valid, as in ZooKeeper, and
//! named in the explanation.
//!
//! "A quorum follows it" is `history::view`'s quorum-backed leader, the one definition: a node
//! is backed while `View::backed` says it is, in the epoch it claims (under the config it
//! reports once a reconfig changed it), where a follower still in sync but already in the
//! leader's epoch (it took and acked NEWLEADER, so the leader counts it; its UPTODATE may be
//! late) counts as following. A stretch starts at the first LEADING read (sync or broadcast)
//! without backing and ends at the last one.
//!
//! A timed-out or failed read proves nothing, so the burden stays on proof:
//! - a failed read of the leader suspends its stretch; its next read LEADING the same epoch
//!   without a quorum continues it, unless it was killed or paused in between; the span it
//!   was not seen is not counted (it may have been stalled, as its reads were);
//! - a follower whose reads fail (not killed or paused, not cut off) may still follow the
//!   leader: it has not been seen since, and a quorum that may exist is not "no quorum";
//! - a follower whose pause or kill is being undone, or whose partition is being healed (the
//!   undo invoked, not yet done: over SSH a resume took 2.3 s and a heal up to 10 s on a
//!   loaded machine), is not proven down or cut off: it counts as the view says only once
//!   read after the undo began; unread since, it may follow (seen on 3.8.0 over SSH: a new
//!   leader's stretch of 2.4 s while its one follower was being resumed and the other's
//!   reads timed out).
//!
//! What it cannot see: a leader is only seen through samples, so a stretch is measured between
//! reads (it may have begun up to one poll earlier, and its last LEADING answer may be up to the
//! read slack old: the slack covers that). A zombie that stops answering reads for good goes
//! unseen. A leader under a clock fault that moves its ticks (only when the run faked the
//! monotonic clock too), or read within the fault's lead after its end, is not judged: the
//! reset can stall its timers for as long as the fault put its clock ahead
//! ([`crate::history::view::FaultInterval::moves_ticks_at`]). A node never read could have
//! led unseen: the verdict is then unknown.

use super::finding::{EvRef, Finding, Item};
use super::model::{Digest, NemesisOp, Rec};
use super::CheckOptions;
use crate::api::{ServerState, ZabPhase};
use crate::duration::moment;
use crate::history::test_info::TestInfo;
use crate::history::view::{quorum_backed, NodeRead, View};
use crate::history::{EventType, FaultStep};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "leader-stepdown";

/// One stretch in which a node reported LEADING an established epoch without a quorum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unbacked {
    pub node: String,
    pub epoch: u64,
    /// First and last LEADING read without a quorum (ns).
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// The bound it was judged against (ms): initLimit or syncLimit ticks plus the slack.
    pub bound_ms: u64,
    /// Under a clock fault, or within its lead after it: named, not judged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_fault: bool,
    #[serde(skip)]
    first_pos: u32,
    #[serde(skip)]
    last_pos: u32,
    /// When the stretch's reads first showed broadcast (the syncLimit clock starts there).
    #[serde(skip)]
    broadcast_since: Option<u64>,
    /// Spans (from its last read before a failed one to its next read) in which it was not
    /// seen: not counted (it may have been stalled, as its reads were).
    #[serde(skip)]
    unseen: Vec<(u64, u64)>,
}

impl Unbacked {
    /// Whether it outlived its timeout: initLimit ticks from its start, or syncLimit ticks
    /// from its first broadcast read, plus the slack (only the time it was seen counts).
    fn too_long(&self, b: &Bounds) -> bool {
        let from_start = self.seen_since(self.start_ns) > b.init_ns + b.slack_ns;
        let in_broadcast = self
            .broadcast_since
            .is_some_and(|t| self.seen_since(t) > b.sync_ns + b.slack_ns);
        from_start || in_broadcast
    }

    /// How long it was seen from `from` to its end, its unseen spans left out.
    fn seen_since(&self, from: u64) -> u64 {
        let unseen: u64 = self
            .unseen
            .iter()
            .map(|&(a, z)| z.min(self.end_ns).saturating_sub(a.max(from)))
            .sum();
        self.end_ns.saturating_sub(from).saturating_sub(unseen)
    }
}

struct Bounds {
    init_ns: u64,
    sync_ns: u64,
    slack_ns: u64,
}

/// What leader-stepdown measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepdownMeasurements {
    /// syncLimit·tickTime and initLimit·tickTime (ms), and the slack added to each.
    pub sync_bound_ms: u64,
    pub init_bound_ms: u64,
    pub slack_ms: u64,
    /// Every stretch seen (the first 1000).
    pub unbacked: Vec<Unbacked>,
    pub unbacked_count: usize,
    pub unbacked_ms_max: Option<u64>,
}

/// The default slack: ZooKeeper's leader checks its quorum every half tick (a tick covers it),
/// its last LEADING answer may be a read slack old, and observers poll (500 ms more).
pub fn default_slack_ms(info: &TestInfo, opts: &CheckOptions) -> u64 {
    info.tick_ms + opts.read_slack_ns() / 1_000_000 + 500
}

/// The slack in force: `CheckOptions::stepdown_slack_ms`, else [`default_slack_ms`].
pub fn slack_ms(info: &TestInfo, opts: &CheckOptions) -> u64 {
    opts.stepdown_slack_ms
        .unwrap_or_else(|| default_slack_ms(info, opts))
}

/// How long a leader in broadcast may go on reporting LEADING once it should not: its Zab
/// timeout (syncLimit ticks) plus the slack. `membership` gives a leader outside its config
/// as long to hand over.
pub fn broadcast_bound_ns(info: &TestInfo, opts: &CheckOptions) -> u64 {
    (info.sync_limit as u64 * info.tick_ms + slack_ms(info, opts)) * 1_000_000
}

/// Follows the stretches while `recovery::view_with` feeds the view (one pass for both).
#[derive(Clone)]
pub struct Tracker {
    open: Vec<Option<Unbacked>>,
    /// A stretch whose leader's read then failed, and since when: the next read of it
    /// LEADING the same epoch unbacked continues it, unless it was down (killed, paused) in
    /// between. A timed-out read proves nothing, so it neither ends nor extends a stretch.
    suspended: Vec<Option<(Unbacked, u64)>>,
    /// Whether each node's reads have failed since its last successful one (the view forgets
    /// such a node; a follower that stops answering may still follow).
    failing: Vec<bool>,
    /// Per node, since when an undo of its stop or cut is in flight (invoked, not yet done).
    undoing: Vec<Undoing>,
    done: Vec<Unbacked>,
    /// Clock faults move the servers' ticks only when the run faked the monotonic clock too.
    clock_moves_ticks: bool,
}

impl Tracker {
    pub fn new(info: &TestInfo) -> Self {
        Tracker {
            open: Vec::new(),
            suspended: Vec::new(),
            failing: Vec::new(),
            undoing: Vec::new(),
            done: Vec::new(),
            clock_moves_ticks: info.fake_monotonic(),
        }
    }

    /// After `r` was fed to `view` (`ix`: the view index of its node).
    pub fn after(&mut self, view: &View, r: &Rec, ix: Option<usize>) {
        let n = view.nodes().len();
        if self.open.len() < n {
            self.open.resize(n, None);
            self.suspended.resize(n, None);
            self.failing.resize(n, false);
            self.undoing.resize(n, Undoing::default());
        }
        let (s, ix) = match (r, ix) {
            (Rec::Nemesis(op), _) => return self.undo_step(view, op),
            (Rec::Status(s), Some(ix)) => (s, ix),
            (Rec::Unreachable { .. }, Some(ix)) => {
                // A failed read: its stretch (if any) waits for the node's next read.
                self.failing[ix] = true;
                if let Some(st) = self.open[ix].take() {
                    self.suspended[ix] = Some((st, view.now()));
                }
                return;
            }
            _ => return,
        };
        self.failing[ix] = false;
        let claim = s.leads();
        let backed = claim.is_some_and(|e| {
            view.backed(ix, 0).is_some_and(|q| q.epoch == e) || self.maybe_backed(view, ix, e)
        });
        let t = view.now();
        if let Some((st, since)) = self.suspended[ix].take() {
            let name = &view.nodes()[ix].name;
            let went_down = view.intervals().iter().any(|f| {
                f.kind.stops_node()
                    && f.nodes.contains(name)
                    && f.start_ns <= t
                    && f.end_ns.is_none_or(|end| end >= since)
            });
            match claim {
                Some(e) if !backed && e == st.epoch && !went_down => {
                    let mut st = st;
                    st.unseen.push((st.end_ns, t));
                    self.open[ix] = Some(st);
                }
                _ => self.done.push(st),
            }
        }
        match claim {
            Some(e) if !backed => {
                let name = &view.nodes()[ix].name;
                let clock = self.clock_moves_ticks
                    && view
                        .intervals()
                        .iter()
                        .any(|f| f.moves_ticks_at(t) && f.nodes.contains(name));
                if self.open[ix].as_ref().is_some_and(|st| st.epoch != e) {
                    self.done.extend(self.open[ix].take());
                }
                let st = self.open[ix].get_or_insert_with(|| Unbacked {
                    node: name.clone(),
                    epoch: e,
                    start_ns: t,
                    end_ns: t,
                    ms: 0,
                    bound_ms: 0,
                    clock_fault: false,
                    first_pos: s.pos,
                    last_pos: s.pos,
                    broadcast_since: None,
                    unseen: Vec::new(),
                });
                st.end_ns = t;
                st.last_pos = s.pos;
                st.clock_fault |= clock;
                if s.phase == ZabPhase::Broadcast && st.broadcast_since.is_none() {
                    st.broadcast_since = Some(t);
                }
            }
            _ => self.done.extend(self.open[ix].take()),
        }
    }

    /// Notes an undo of a stop or a cut from its invoke until it is done (then the view has
    /// applied it) or failed.
    fn undo_step(&mut self, view: &View, op: &NemesisOp) {
        let Some(FaultStep::Undoes(kind)) = op.value.step(op.f) else {
            return;
        };
        let pick: fn(&mut Undoing) -> &mut Option<u64> = if kind.stops_node() {
            |u| &mut u.stop
        } else if kind.cuts_links() {
            |u| &mut u.cut
        } else {
            return;
        };
        let named: Vec<usize> = op
            .value
            .nodes
            .iter()
            .filter_map(|name| view.nodes().iter().position(|n| &n.name == name))
            .collect();
        let all = op.value.r#final || named.is_empty();
        for (i, u) in self.undoing.iter_mut().enumerate() {
            if all || named.contains(&i) {
                *pick(u) = (op.kind == EventType::Invoke).then_some(op.time);
            }
        }
    }

    /// Whether a quorum may still follow `leader` in epoch `e`: the view's one definition of
    /// a quorum-backed leader over a snapshot in which every node not proven elsewhere may
    /// follow it (its reads failing, or its stop or cut being undone and it unread since). A
    /// stretch needs proof that no quorum followed.
    ///
    /// A follower of `leader` still in sync but already in epoch `e` has taken NEWLEADER (a
    /// follower takes the new currentEpoch there) and acked it: the leader counts it toward
    /// its quorum (ZooKeeper's and fle-node's leader count a learner from its NEWLEADER ack;
    /// UPTODATE may still be on its way), so it backs the leader here as in broadcast.
    fn maybe_backed(&self, view: &View, leader: usize, e: u64) -> bool {
        let in_doubt = |i: usize| self.failing[i] || self.undoing[i].since().is_some();
        let Some(sid) = view.nodes()[leader].sid else {
            return false;
        };
        let acked_newleader = |r: &NodeRead| {
            r.state == ServerState::Following
                && r.phase == ZabPhase::Sync
                && r.leader == Some(sid)
                && r.peer_epoch == e
        };
        let syncing = |i: usize| view.nodes()[i].read.is_some_and(|r| acked_newleader(&r));
        if !(0..view.nodes().len()).any(|i| in_doubt(i) || syncing(i)) {
            return false;
        }
        let mut nodes = view.nodes().to_vec();
        let now = view.now();
        for (i, n) in nodes.iter_mut().enumerate() {
            if let Some(r) = n.read.as_mut().filter(|r| acked_newleader(r)) {
                r.phase = ZabPhase::Broadcast;
            }
            let u = self.undoing[i];
            if u.stop.is_some() {
                n.down = false;
            }
            if u.cut.is_some() {
                n.drops.clear();
            }
            if let Some(since) = u.since() {
                if n.read.is_some_and(|r| r.time < since) {
                    n.read = None;
                }
            }
            if i != leader && n.read.is_none() && in_doubt(i) && !n.down {
                n.read = Some(NodeRead {
                    time: now,
                    pos: 0,
                    state: ServerState::Following,
                    phase: ZabPhase::Broadcast,
                    leader: Some(sid),
                    peer_epoch: e,
                    accepted_epoch: e,
                    last_committed_zxid: 0,
                });
            }
        }
        quorum_backed(&nodes, leader, view.quorum(), 0).is_some_and(|q| q.epoch == e)
    }
}

/// A node's undos in flight: since when its resume or restart (`stop`) and the heal of its
/// cuts (`cut`) were invoked, not yet done.
#[derive(Debug, Clone, Copy, Default)]
struct Undoing {
    stop: Option<u64>,
    cut: Option<u64>,
}

impl Undoing {
    /// Since when its state as the view holds it has been in doubt (the earlier undo).
    fn since(&self) -> Option<u64> {
        self.stop.into_iter().chain(self.cut).min()
    }
}

/// Judges a digest on its own (one view pass); `check_digest` shares recovery's pass instead.
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let mut t = Tracker::new(info);
    super::recovery::view_with(d, info, |_, _, _| {}, |v, r, ix| t.after(v, r, ix));
    judge(&t, d, info, opts)
}

/// The verdict on the stretches a tracker followed.
pub fn judge(t: &Tracker, d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let slack_ms = slack_ms(info, opts);
    let b = Bounds {
        init_ns: info.init_limit as u64 * info.tick_ms * 1_000_000,
        sync_ns: info.sync_limit as u64 * info.tick_ms * 1_000_000,
        slack_ns: slack_ms * 1_000_000,
    };
    let Tracker {
        open,
        suspended,
        mut done,
        ..
    } = t.clone();
    done.extend(open.into_iter().flatten());
    done.extend(suspended.into_iter().flatten().map(|(u, _)| u));
    done.sort_by_key(|u| u.start_ns);

    let mut violations: Vec<Item> = Vec::new();
    let mut gaps: Vec<Item> = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for u in &mut done {
        u.ms = (u.end_ns - u.start_ns) / 1_000_000;
        let limit = if u.broadcast_since.is_some() {
            b.sync_ns
        } else {
            b.init_ns
        };
        u.bound_ms = (limit + b.slack_ns) / 1_000_000;
        let (what, ev) = stretch_in_words(u);
        if !u.too_long(&b) {
            named.push(format!("{what}, within its timeout"));
        } else if u.clock_fault {
            // Not even after the fault: its reset moves a faked monotonic clock back by what a
            // forward bump moved it on, and timers that never go back stall that long.
            gaps.push((
                format!("{what}, beyond the bound of {} ms, but under a clock fault that moved its ticks, or less than the fault's lead after its reset (the run faked the monotonic clock), so it is not judged.", u.bound_ms),
                ev,
            ));
        } else {
            violations.push((
                format!("{what}, beyond {} ms ({} ticks of {} ms plus {slack_ms} ms of observer slack): a leader without a quorum must step down.", u.bound_ms,
                    if u.broadcast_since.is_some() { info.sync_limit } else { info.init_limit }, info.tick_ms),
                ev,
            ));
        }
    }
    for n in &info.nodes {
        let ix = d.nodes.iter().position(|x| x == n);
        if ix.is_none_or(|i| d.reads[i] == 0) {
            gaps.push((
                format!("{n} was never read: it may have led without a quorum unseen."),
                vec![],
            ));
        }
    }
    let ok = ok_text(&b, slack_ms, &named);
    let m = StepdownMeasurements {
        sync_bound_ms: b.sync_ns / 1_000_000,
        init_bound_ms: b.init_ns / 1_000_000,
        slack_ms,
        unbacked_count: done.len(),
        unbacked_ms_max: done.iter().map(|u| u.ms).max(),
        unbacked: done.into_iter().take(1000).collect(),
    };
    Finding::judge(violations, gaps, ok).with_measurements(super::Measurements::Stepdown(m))
}

/// A stretch of a leader without a quorum in words (its length, from, to, how much of it was
/// seen), and its first and last reads as evidence.
fn stretch_in_words(u: &Unbacked) -> (String, Vec<EvRef>) {
    let seen = if u.unseen.is_empty() {
        String::new()
    } else {
        format!(
            ", {} of it seen (its reads failed for the rest)",
            moment(u.seen_since(u.start_ns))
        )
    };
    let what = format!(
        "{} reported LEADING epoch {} without a quorum following it for {} (from {} to {}{seen})",
        u.node,
        u.epoch,
        moment(u.end_ns - u.start_ns),
        moment(u.start_ns),
        moment(u.end_ns)
    );
    let ev = vec![
        EvRef::new(
            u.first_pos,
            format!("{} LEADING epoch {} without a quorum", u.node, u.epoch),
        ),
        EvRef::new(
            u.last_pos,
            format!("{} still LEADING epoch {}", u.node, u.epoch),
        ),
    ];
    (what, ev)
}

/// The valid verdict's words: the bounds, and the stretches found within them (the first few).
fn ok_text(b: &Bounds, slack_ms: u64, named: &[String]) -> String {
    if named.is_empty() {
        format!("No server was seen LEADING without a quorum following it (bounds: syncLimit·tickTime {} ms, initLimit·tickTime {} ms, plus {slack_ms} ms).", b.sync_ns / 1_000_000, b.init_ns / 1_000_000)
    } else {
        const SHOWN: usize = 5;
        let more = named.len().saturating_sub(SHOWN);
        let mut text = format!(
            "Every leader without a quorum stepped down in time (bounds: syncLimit·tickTime {} ms, initLimit·tickTime {} ms, plus {slack_ms} ms). {} stretch(es) of a leader without a quorum (a stale leader not yet aware, or a new one whose followers were still syncing), valid as in ZooKeeper: {}.",
            b.sync_ns / 1_000_000,
            b.init_ns / 1_000_000,
            named.len(),
            named.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ")
        );
        if more > 0 {
            text.push_str(&format!(" ({more} more not listed.)"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Validity;
    use crate::history::Event;

    fn info() -> TestInfo {
        TestInfo::for_tests(&["n1", "n2", "n3"])
    }

    fn read(i: usize, ms: u64, sid: u64, state: &str, leader: Option<u64>, epoch: u64) -> Event {
        let phase = match state {
            "LOOKING" => "election",
            // n1 took NEWLEADER (its currentEpoch is the leader's) or not yet; UPTODATE is late.
            "FOLLOWING" => "sync",
            _ => "broadcast",
        };
        let n = format!("n{sid}");
        serde_json::from_value(serde_json::json!({
            "index": i, "time": ms * 1_000_000, "process": n, "type": "ok", "f": "status",
            "node": n, "value": {
                "state": state, "leader": leader, "peer_epoch": epoch, "zab_phase": phase,
                "accepted_epoch": 2, "last_zxid": 0, "last_committed_zxid": 0
            }
        }))
        .unwrap()
    }

    /// Simulated seeds 264, 563 and 801 under 30 % packet loss: the leader in broadcast, a
    /// follower that acked NEWLEADER still in sync for 3 s while retransmissions held up its
    /// UPTODATE. The leader counts it from its ack (ZooKeeper's `LearnerHandler.synced()` too),
    /// so it is no zombie; a follower not yet in the leader's epoch has not acked and does not
    /// count.
    #[test]
    fn a_follower_awaiting_uptodate_backs_its_leader() {
        let verdict = |follower_epoch| {
            let mut events = Vec::new();
            for k in 0..60 {
                let t = 1000 + k * 50;
                events.push(read(events.len(), t, 3, "LEADING", Some(3), 2));
                events.push(read(
                    events.len(),
                    t + 1,
                    1,
                    "FOLLOWING",
                    Some(3),
                    follower_epoch,
                ));
                events.push(read(events.len(), t + 2, 2, "LOOKING", None, 1));
            }
            let d = crate::checker::model::digest_events(&events, &info().nodes).unwrap();
            check(&d, &info(), &CheckOptions::default())
        };
        let acked = verdict(2);
        assert_eq!(acked.valid, Validity::True, "{}", acked.explanation);
        let not_acked = verdict(1);
        assert_eq!(
            not_acked.valid,
            Validity::False,
            "{}",
            not_acked.explanation
        );
    }
}
