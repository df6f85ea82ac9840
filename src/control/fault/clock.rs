//! `Clock`: the capability of moving a node's clock, and the settings the clock nemesis uses.
//!
//! Two mechanisms implement it, and nothing above this trait knows which one runs:
//! - libfaketime (`faketime::FaketimeClock`): each node process runs with a control file whose
//!   text is its offset or rate; with `FAKETIME_NO_CACHE=1` the node reads the file at every
//!   clock call, so a rewrite is an instant step of its wall clock. The target owns it, since
//!   the target decides how a node is started.
//! - the host's system clock (`--ssh --real-clock-skew`): `clock_settime` on a throwaway VM
//!   (`host_clock`), offered by the `Control` whose hosts it may step.

use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;

/// How a cluster's clocks are moved; recorded with every clock fault (`mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// A libfaketime control file per node process.
    Libfaketime,
    /// The host's system clock, stepped with clock_settime.
    ClockSettime,
}

impl Mechanism {
    /// The name the history records.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Libfaketime => "libfaketime",
            Mechanism::ClockSettime => "clock_settime",
        }
    }

    /// The history field listing what `Clock::set` did per node: `files` or `steps_ms`.
    pub fn changes_field(self) -> &'static str {
        match self {
            Mechanism::Libfaketime => "files",
            Mechanism::ClockSettime => "steps_ms",
        }
    }
}

/// What one `Clock::set` did, as the history records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ClockChange {
    /// The libfaketime control file written.
    File(PathBuf),
    /// How far the host's clock was stepped, in ms.
    StepMs(i64),
}

/// Moving the clocks of a cluster's nodes.
pub trait Clock: Send + Sync {
    fn mechanism(&self) -> Mechanism;
    /// Puts `setting` in force on `node`'s clock.
    fn set(&self, node: &str, setting: ClockSetting) -> Result<ClockChange>;
    /// The skew in force on `node`'s clock, for the final verification: None when there is
    /// none, else what it is.
    fn skew_left(&self, node: &str) -> Result<Option<String>>;
}

/// A clock setting the nemesis puts in force on a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockSetting {
    /// The wall clock this many ms away from the real one (0: no skew).
    Offset(i64),
    /// The clock running this many times as fast (libfaketime only).
    Rate(f64),
}

impl ClockSetting {
    /// The libfaketime control-file text for this setting.
    pub fn faketime_text(self) -> String {
        match self {
            ClockSetting::Offset(ms) => offset_text(ms),
            ClockSetting::Rate(f) => rate_text(f),
        }
    }
}

/// The control-file text for a wall clock `offset_ms` away from the real one.
pub fn offset_text(offset_ms: i64) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let abs = offset_ms.unsigned_abs();
    format!("{sign}{}.{:03}\n", abs / 1000, abs % 1000)
}

/// The control-file text for a clock running `factor` times as fast. libfaketime measures the
/// speed-up from the process's start, so turning it on mid-run also steps the clock once.
pub fn rate_text(factor: f64) -> String {
    format!("+0 x{factor:.3}\n")
}

/// The text of a clock with no skew.
pub fn reset_text() -> String {
    offset_text(0)
}

/// Whether a control file's text means "no skew".
pub fn is_reset(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || t.trim_start_matches(['+', '-']).parse::<f64>() == Ok(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_signed_seconds_with_millis() {
        assert_eq!(offset_text(60_000), "+60.000\n");
        assert_eq!(offset_text(-300_250), "-300.250\n");
        assert_eq!(offset_text(5), "+0.005\n");
        assert_eq!(rate_text(2.0), "+0 x2.000\n");
        assert!(
            is_reset(&reset_text())
                && is_reset("+0\n")
                && !is_reset("+1.5")
                && !is_reset("+0 x2.000")
        );
    }
}
