//! How a time is written for people, in explanations, reports and progress lines: one home,
//! so a moment or a length reads the same wherever it is shown. Two things are written, and
//! they differ on purpose:
//! - a *moment* of a run (time since its start, from the history) keeps milliseconds, so two
//!   events can be told apart and found in the history by their time;
//! - a *span* (how long something took) is rounded for reading, in minutes and hours when long.
//!
//! Durations that are read back (the nemesis schedule's "4.138s") are serialisation, not
//! display, and live with their format.

/// "1.234 s" from nanoseconds: a moment of a run, as explanations and the report write it.
pub fn moment(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// "1.25 s", "3 min 20 s", "1 h 2 min": how long something took, for people.
pub fn span(seconds: f64) -> String {
    if seconds < 59.995 {
        return format!("{seconds:.2} s");
    }
    // Rounded once, before it is split: rounding the seconds part alone wrote "2 min 60 s".
    let whole = seconds.round() as u64;
    if whole < 3600 {
        format!("{} min {} s", whole / 60, whole % 60)
    } else {
        format!("{} h {} min", whole / 3600, whole % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::{moment, span};

    #[test]
    fn a_moment_keeps_its_milliseconds() {
        assert_eq!(moment(1_234_567_890), "1.235 s");
        assert_eq!(moment(200_000_000_000), "200.000 s");
    }

    #[test]
    fn a_duration_carries_its_rounding_into_the_minutes() {
        assert_eq!(span(1.254), "1.25 s");
        assert_eq!(span(59.996), "1 min 0 s");
        assert_eq!(span(179.6), "3 min 0 s");
        assert_eq!(span(200.0), "3 min 20 s");
        assert_eq!(span(3599.7), "1 h 0 min");
        assert_eq!(span(3725.0), "1 h 2 min");
    }
}
