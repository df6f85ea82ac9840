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
//! is backed while `View::quorum_leader` names it in the epoch it claims. A stretch starts at
//! the first LEADING read (sync or broadcast) without backing and ends at the last one.
//!
//! What it cannot see: a leader is only seen through samples, so a stretch is measured between
//! reads (it may have begun up to one poll earlier, and its last LEADING answer may be up to the
//! read slack old: the slack covers that). A leader the observer cannot reach (paused, killed)
//! is not LEADING as far as the view knows, so a zombie that also stops answering reads goes
//! unseen. A leader under a clock fault counts ticks on a moved clock: its stretches are named
//! but not judged. A node never read could have led unseen: the verdict is then unknown.

use super::finding::{secs, EvRef, Finding, Item};
use super::model::{Digest, Rec};
use super::CheckOptions;
use crate::api::ZabPhase;
use crate::history::test_info::TestInfo;
use crate::history::view::View;
use crate::history::FaultKind;
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
    /// Under a clock fault: named, not judged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_fault: bool,
    #[serde(skip)]
    first_pos: u32,
    #[serde(skip)]
    last_pos: u32,
    /// When the stretch's reads first showed broadcast (the syncLimit clock starts there).
    #[serde(skip)]
    broadcast_since: Option<u64>,
}

impl Unbacked {
    /// Whether it outlived its timeout: initLimit ticks from its start, or syncLimit ticks
    /// from its first broadcast read, plus the slack.
    fn too_long(&self, b: &Bounds) -> bool {
        let from_start = self.end_ns - self.start_ns > b.init_ns + b.slack_ns;
        let in_broadcast = self
            .broadcast_since
            .is_some_and(|t| self.end_ns - t > b.sync_ns + b.slack_ns);
        from_start || in_broadcast
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

/// Follows the stretches while `recovery::view_with` feeds the view (one pass for both).
pub struct Tracker {
    open: Vec<Option<Unbacked>>,
    done: Vec<Unbacked>,
}

impl Tracker {
    pub fn new() -> Self {
        Tracker {
            open: Vec::new(),
            done: Vec::new(),
        }
    }

    /// After `r` was fed to `view` (`ix`: the view index of its node).
    pub fn after(&mut self, view: &View, r: &Rec, ix: Option<usize>) {
        let Some(ix) = ix else { return };
        if self.open.len() <= ix {
            self.open.resize(ix + 1, None);
        }
        let Rec::Status(s) = r else {
            // A failed read: the view forgot the node; its stretch (if any) ends.
            self.done.extend(self.open[ix].take());
            return;
        };
        let claim = s.leads();
        let backed = claim.is_some_and(|e| {
            view.quorum_leader(0)
                .is_some_and(|q| q.node == ix && q.epoch == e)
        });
        match claim {
            Some(e) if !backed => {
                let t = view.now();
                let name = &view.nodes()[ix].name;
                let clock = view
                    .active_faults()
                    .any(|f| f.kind == FaultKind::Clock && f.nodes.contains(name));
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
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

/// Judges a digest on its own (one view pass); `check_digest` shares recovery's pass instead.
pub fn check(d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let mut t = Tracker::new();
    super::recovery::view_with(d, info, |v, r, ix| t.after(v, r, ix));
    judge(t, d, info, opts)
}

/// The verdict on the stretches a tracker followed.
pub fn judge(t: Tracker, d: &Digest, info: &TestInfo, opts: &CheckOptions) -> Finding {
    let slack_ms = opts
        .stepdown_slack_ms
        .unwrap_or_else(|| default_slack_ms(info, opts));
    let b = Bounds {
        init_ns: info.init_limit as u64 * info.tick_ms * 1_000_000,
        sync_ns: info.sync_limit as u64 * info.tick_ms * 1_000_000,
        slack_ns: slack_ms * 1_000_000,
    };
    let Tracker { open, mut done } = t;
    done.extend(open.into_iter().flatten());
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
        let what = format!(
            "{} reported LEADING epoch {} without a quorum following it for {} (from {} to {})",
            u.node,
            u.epoch,
            secs(u.end_ns - u.start_ns),
            secs(u.start_ns),
            secs(u.end_ns)
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
        if !u.too_long(&b) {
            named.push(format!("{what}, within its timeout"));
        } else if u.clock_fault {
            gaps.push((
                format!("{what}, beyond the bound of {} ms, but under a clock fault (its ticks run on a moved clock), so it is not judged.", u.bound_ms),
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
    let ok = if named.is_empty() {
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
    };
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
