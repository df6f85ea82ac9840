//! Rate-limited warnings for bad input from outside (peers, strangers on our ports).
//!
//! A flood of garbage must not become a flood of log lines (issue 18: 2000 bad frames made 637
//! WARN lines): per source and interval the first warning is logged, later ones are only
//! counted, and the next logged line says how many were suppressed. The exact totals are the
//! counters in `/status`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One line per source per this interval.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);
/// Sources remembered at most (a flood from many addresses must not grow the map without end).
const MAX_SOURCES: usize = 1024;

#[derive(Debug)]
pub struct WarnLimiter {
    interval: Duration,
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Default for WarnLimiter {
    fn default() -> Self {
        WarnLimiter::new(WARN_INTERVAL)
    }
}

impl WarnLimiter {
    pub fn new(interval: Duration) -> Self {
        WarnLimiter {
            interval,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(suppressed since the last line)` when a line about `source` may be logged now;
    /// `None` when it is only counted.
    pub fn allow(&self, source: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = source;
        if !seen.contains_key(source) && seen.len() >= MAX_SOURCES {
            let interval = self.interval;
            seen.retain(|_, (last, _)| now.saturating_duration_since(*last) < interval);
            if seen.len() >= MAX_SOURCES {
                // Still full of live sources: count this one under a shared key.
                key = "(other sources)";
            }
        }
        match seen.get_mut(key) {
            Some((last, suppressed)) => {
                if now.saturating_duration_since(*last) < self.interval {
                    *suppressed += 1;
                    return None;
                }
                *last = now;
                Some(std::mem::take(suppressed))
            }
            None => {
                seen.insert(key.to_string(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_source_per_interval_with_the_count_of_the_rest() {
        let w = WarnLimiter::new(Duration::from_secs(10));
        let t = Instant::now();
        assert_eq!(w.allow("a", t), Some(0));
        for i in 1..=5 {
            assert_eq!(w.allow("a", t + Duration::from_secs(i)), None);
        }
        assert_eq!(w.allow("b", t), Some(0), "sources are separate");
        assert_eq!(w.allow("a", t + Duration::from_secs(10)), Some(5));
        assert_eq!(w.allow("a", t + Duration::from_secs(11)), None);
    }

    #[test]
    fn many_sources_do_not_grow_the_map_without_end() {
        let w = WarnLimiter::new(Duration::from_secs(10));
        let t = Instant::now();
        let logged = (0..5000)
            .filter(|i| {
                w.allow(&format!("10.0.{}.{}", i / 256, i % 256), t)
                    .is_some()
            })
            .count();
        assert!(w.seen.lock().unwrap().len() <= MAX_SOURCES + 1);
        assert!(logged <= MAX_SOURCES + 1, "{logged} lines");
    }
}
