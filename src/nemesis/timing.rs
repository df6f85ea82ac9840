//! When faults come: a fixed period (the old metronome), or seeded random gaps and durations
//! (exponential or jittered around the schedule's values), so that faults land at every phase of
//! what the cluster is doing instead of in lockstep with it. All draws come from the plan's seeded
//! generator, so a seed still replays the same times.

use rand::Rng;
use std::time::Duration;

/// How gaps (`interval`) and durations are drawn (schedule key `timing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// Exactly `interval` of quiet, faults of exactly their duration.
    #[default]
    Fixed,
    /// Exponential draws with the schedule's values as means (a Poisson process of faults),
    /// clamped to [MIN_FACTOR, MAX_FACTOR] times the mean so that a run stays planable.
    Exponential,
    /// Uniform draws within +/- half of the schedule's values.
    Jittered,
}

/// The shortest and longest draw, as factors of the mean.
pub const MIN_FACTOR: f64 = 0.2;
pub const MAX_FACTOR: f64 = 3.0;

impl Timing {
    pub const ALL: [Timing; 3] = [Timing::Fixed, Timing::Exponential, Timing::Jittered];

    pub fn name(self) -> &'static str {
        match self {
            Timing::Fixed => "fixed",
            Timing::Exponential => "exponential",
            Timing::Jittered => "jittered",
        }
    }

    pub fn parse(s: &str) -> Option<Timing> {
        Timing::ALL.into_iter().find(|t| t.name() == s)
    }

    /// A gap or duration around `mean`. Fixed timing draws nothing (a fixed plan stays the same
    /// sequence it always was for a seed).
    pub fn draw(self, mean: Duration, rng: &mut impl Rng) -> Duration {
        let factor = match self {
            Timing::Fixed => return mean,
            // Inverse transform: -ln(U) is exponential with mean 1.
            Timing::Exponential => -(1.0 - rng.gen::<f64>()).ln(),
            Timing::Jittered => rng.gen_range(0.5..1.5),
        };
        mean.mul_f64(factor.clamp(MIN_FACTOR, MAX_FACTOR))
    }

    /// The shortest draw around `mean` (what preflight needs to fit at least once).
    pub fn shortest(self, mean: Duration) -> Duration {
        match self {
            Timing::Fixed => mean,
            Timing::Exponential => mean.mul_f64(MIN_FACTOR),
            Timing::Jittered => mean.mul_f64(0.5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn draws_stay_in_bounds_and_average_near_the_mean() {
        let mean = Duration::from_secs(4);
        for timing in [Timing::Exponential, Timing::Jittered] {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let draws: Vec<Duration> = (0..4000).map(|_| timing.draw(mean, &mut rng)).collect();
            let avg = draws.iter().map(Duration::as_secs_f64).sum::<f64>() / draws.len() as f64;
            assert!((3.2..4.8).contains(&avg), "{timing:?}: mean {avg}");
            assert!(draws.iter().all(|d| *d >= timing.shortest(mean)));
            assert!(draws.iter().all(|d| *d <= mean.mul_f64(MAX_FACTOR)));
            let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
            assert!(distinct.len() > 1000, "{timing:?} barely varies");
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        assert_eq!(Timing::Fixed.draw(mean, &mut rng), mean);
    }
}
