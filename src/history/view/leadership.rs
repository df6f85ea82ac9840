//! `history::view::leadership`: the stretches without a quorum-backed leader (leaderless
//! windows) and those in which two or more nodes claimed to lead established epochs at once
//! (overlaps), opened and closed as events arrive.

use super::cluster::{Cluster, LeaderClaim};
use serde::{Deserialize, Serialize};

/// A stretch without a quorum-backed leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_at_end: bool,
}

/// A stretch in which two or more nodes claimed to lead at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overlap {
    pub start_ns: u64,
    pub end_ns: u64,
    pub ms: u64,
    /// Who claimed when the overlap began.
    pub leaders: Vec<LeaderClaim>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_at_end: bool,
}

/// The leadership sub-fold of a view: windows and overlaps, open and closed.
#[derive(Debug, Clone, Default)]
pub(super) struct Leadership {
    window_start: Option<u64>,
    pub(super) windows: Vec<Window>,
    overlap: Option<Overlap>,
    pub(super) overlaps: Vec<Overlap>,
}

impl Leadership {
    /// After an event at `time`: opens or closes the leaderless window (`led`: a
    /// quorum-backed leader exists now) and the overlap.
    pub(super) fn judge(&mut self, time: u64, led: bool, cluster: &Cluster) {
        match (led, self.window_start) {
            (true, Some(start)) => {
                self.windows.push(Window {
                    start_ns: start,
                    end_ns: time,
                    ms: (time - start) / 1_000_000,
                    open_at_end: false,
                });
                self.window_start = None;
            }
            (false, None) => self.window_start = Some(time),
            _ => {}
        }
        match (&mut self.overlap, cluster.claiming() >= 2) {
            (None, true) => {
                self.overlap = Some(Overlap {
                    start_ns: time,
                    end_ns: time,
                    ms: 0,
                    leaders: cluster.claims(),
                    open_at_end: false,
                })
            }
            (Some(o), false) => {
                o.end_ns = time;
                o.ms = (time - o.start_ns) / 1_000_000;
                self.overlaps
                    .push(self.overlap.take().expect("matched Some"));
            }
            _ => {}
        }
    }

    /// The history ends at `end`: what is open ends then, marked open at the end.
    pub(super) fn finish(&mut self, end: u64) {
        if let Some(start) = self.window_start.take() {
            self.windows.push(Window {
                start_ns: start,
                end_ns: end,
                ms: (end - start) / 1_000_000,
                open_at_end: true,
            });
        }
        if let Some(mut o) = self.overlap.take() {
            o.end_ns = end;
            o.ms = (end - o.start_ns) / 1_000_000;
            o.open_at_end = true;
            self.overlaps.push(o);
        }
    }
}
