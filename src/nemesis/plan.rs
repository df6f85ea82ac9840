//! The seeded generator: a schedule and a seed become one fixed sequence of faults with their
//! start times, durations and random picks. Everything random is drawn here, up front, so the same
//! seed and settings give the same sequence; only roles (who leads) are resolved at run time.

use super::schedule::{ClockMode, FaultTemplate, Schedule};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// One fault the nemesis will inject.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFault {
    /// When it starts, from the start of the nemesis.
    pub start: Duration,
    /// How long it lasts before it is undone.
    pub duration: Duration,
    pub template: FaultTemplate,
    /// A random word for choices made at run time (which random node, which shuffle).
    pub pick: u64,
    /// The clock delta after the seeded sign is applied (clock bumps only).
    pub clock_delta_ms: Option<i64>,
}

/// The endless sequence of faults a schedule and a seed give, in order.
pub struct Planner<'a> {
    schedule: &'a Schedule,
    rng: ChaCha8Rng,
    total_weight: u64,
    next_start: Duration,
}

impl<'a> Planner<'a> {
    pub fn new(schedule: &'a Schedule, seed: u64) -> Self {
        Planner {
            schedule,
            rng: ChaCha8Rng::seed_from_u64(seed),
            total_weight: schedule.faults.iter().map(|f| u64::from(f.weight)).sum(),
            next_start: schedule.interval,
        }
    }
}

impl Iterator for Planner<'_> {
    type Item = PlannedFault;

    fn next(&mut self) -> Option<PlannedFault> {
        if self.total_weight == 0 {
            return None;
        }
        let mut ticket = self.rng.gen_range(0..self.total_weight);
        let template = self.schedule.faults.iter().find(|f| {
            let w = u64::from(f.weight);
            if ticket < w {
                true
            } else {
                ticket -= w;
                false
            }
        })?;
        let duration = template.duration.unwrap_or(self.schedule.duration);
        let pick = self.rng.gen::<u64>();
        let clock_delta_ms = match template.clock {
            Some(ClockMode::Bump {
                delta_ms,
                random_sign,
            }) => Some(if random_sign && self.rng.gen_bool(0.5) {
                -delta_ms
            } else {
                delta_ms
            }),
            _ => None,
        };
        let start = self.next_start;
        self.next_start += duration + self.schedule.interval;
        Some(PlannedFault {
            start,
            duration,
            template: template.clone(),
            pick,
            clock_delta_ms,
        })
    }
}

/// How much of a run of `time_limit` faults may use: all but the last tenth (at most 10 s),
/// kept so that the last fault is undone before the run's stop, on time.
pub fn fault_window(time_limit: Duration) -> Duration {
    time_limit.saturating_sub(time_limit.min(Duration::from_secs(10)) / 10)
}

/// The shortest `--time-limit` whose fault window holds `need`.
pub fn time_limit_for(need: Duration) -> Duration {
    if need <= Duration::from_secs(9) {
        need.mul_f64(10.0 / 9.0)
    } else {
        need + Duration::from_secs(1)
    }
}

/// The faults planned to start and end before `until`: a timed schedule's steps as written,
/// else the seeded plan.
pub fn plan(schedule: &Schedule, seed: u64, until: Duration) -> Vec<PlannedFault> {
    if let Some(steps) = &schedule.timed {
        return steps
            .iter()
            .filter(|f| f.start + f.duration <= until)
            .cloned()
            .collect();
    }
    Planner::new(schedule, seed)
        .take_while(|f| f.start + f.duration <= until)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::schedule::FaultKind;

    fn mixed() -> Schedule {
        Schedule::from_flags(
            "kill,pause,partition,clock",
            Duration::from_secs(2),
            Duration::from_secs(3),
        )
        .unwrap()
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_plan() {
        let a = plan(&mixed(), 42, Duration::from_secs(120));
        let b = plan(&mixed(), 42, Duration::from_secs(120));
        let c = plan(&mixed(), 43, Duration::from_secs(120));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.len() >= 20, "{} faults in 120 s", a.len());
    }

    #[test]
    fn faults_fit_and_do_not_overlap() {
        let p = plan(&mixed(), 7, Duration::from_secs(60));
        for pair in p.windows(2) {
            assert!(pair[0].start + pair[0].duration < pair[1].start);
        }
        let last = p.last().unwrap();
        assert!(last.start + last.duration <= Duration::from_secs(60));
    }

    #[test]
    fn weights_bias_the_choice() {
        let mut s = Schedule::from_flags(
            "kill,pause",
            Duration::from_millis(1),
            Duration::from_millis(1),
        )
        .unwrap();
        s.faults[0].weight = 9;
        let p = plan(&s, 1, Duration::from_secs(10));
        let kills = p
            .iter()
            .filter(|f| f.template.kind == FaultKind::Kill)
            .count();
        assert!(kills * 10 > p.len() * 8, "{kills} kills of {}", p.len());
    }

    #[test]
    fn no_faults_no_plan() {
        assert!(plan(&Schedule::none(), 1, Duration::from_secs(60)).is_empty());
    }
}
