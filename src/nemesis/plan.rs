//! The seeded generator: a schedule and a seed become one fixed sequence of faults with their
//! start times, durations and random picks. Everything random is drawn here, up front, so the same
//! seed and settings give the same sequence; only roles (who leads) are resolved at run time.

use super::schedule::{ClockMode, FaultTemplate, PlannedFault, Schedule};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// The endless sequence of faults a schedule and a seed give, in order.
///
/// Entries are dealt from a deck that holds each `[[fault]]` `weight` times, dealt to the end
/// before a new one is shuffled: over every deck the weights are exact, and only the order is
/// random. A deck is shuffled in rounds, breadth first: round k holds, once each, the entries
/// that weigh k or more, so every entry comes up within the first deal of as many faults as
/// the schedule has entries, and the heavier ones come back after. Independent weighted draws
/// left an entry of weight 3 (of 46) out of 1 run in 10 at 5 minutes (about 33 draws); a
/// plain shuffled deck of 36 still left the last few out of a run that dealt 31.
pub struct Planner<'a> {
    schedule: &'a Schedule,
    rng: ChaCha8Rng,
    /// The undealt rest of the deck: indices into `schedule.faults`, dealt from the end
    /// (the first round last).
    deck: Vec<usize>,
    next_start: Duration,
    /// The least gap before the next fault: the previous one's `quiet_after`.
    quiet: Duration,
}

impl<'a> Planner<'a> {
    pub fn new(schedule: &'a Schedule, seed: u64) -> Self {
        Planner {
            schedule,
            rng: ChaCha8Rng::seed_from_u64(seed),
            deck: Vec::new(),
            next_start: Duration::ZERO,
            quiet: Duration::ZERO,
        }
    }

    /// The next entry off the deck, shuffling a new deck (round by round) when this one is
    /// dealt.
    fn deal(&mut self) -> Option<&'a FaultTemplate> {
        if self.deck.is_empty() {
            let heaviest = self.schedule.faults.iter().map(|f| f.weight).max();
            for k in 1..=heaviest.unwrap_or(0) {
                let mut round: Vec<usize> = (self.schedule.faults.iter().enumerate())
                    .filter(|(_, f)| f.weight >= k)
                    .map(|(i, _)| i)
                    .collect();
                round.shuffle(&mut self.rng);
                self.deck.extend(round);
            }
            self.deck.reverse();
        }
        let schedule = self.schedule;
        self.deck.pop().map(|i| &schedule.faults[i])
    }
}

impl Iterator for Planner<'_> {
    type Item = PlannedFault;

    fn next(&mut self) -> Option<PlannedFault> {
        let template = self.deal()?;
        // Fixed timing draws nothing here, so a fixed schedule's plan for a seed is unchanged.
        let timing = self.schedule.timing;
        let gap = timing
            .draw(self.schedule.interval, &mut self.rng)
            .max(self.quiet);
        let duration = template.duration_timing.unwrap_or(timing).draw(
            template.duration.unwrap_or(self.schedule.duration),
            &mut self.rng,
        );
        let mut fault = self.draw(template, Duration::ZERO, duration);
        let group = template.group_name();
        for part in &template.with {
            let d = part.duration.unwrap_or(self.schedule.duration);
            let mut p = self.draw(part, part.after, d);
            if let Some(g) = &group {
                p.annotations.insert("composed".into(), g.clone().into());
            }
            fault.parts.push(p);
        }
        if let Some(g) = group {
            fault.annotations.insert("composed".into(), g.into());
        }
        fault.start = self.next_start + gap;
        fault.gap = gap;
        fault.quiet = self.quiet;
        self.next_start = fault.start + fault.span();
        self.quiet = template.quiet_after;
        Some(fault)
    }
}

impl Planner<'_> {
    /// The seeded picks of one fault (or composed part) starting at `start`.
    fn draw(
        &mut self,
        template: &FaultTemplate,
        start: Duration,
        duration: Duration,
    ) -> PlannedFault {
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
        PlannedFault {
            start,
            duration,
            template: template.clone(),
            pick,
            clock_delta_ms,
            gap: Duration::ZERO,
            quiet: Duration::ZERO,
            parts: Vec::new(),
            annotations: serde_json::Map::new(),
        }
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
/// else the seeded plan. With random timing, the first fault that does not fit is tried once
/// more at its shortest gap and duration, so that a window preflight accepted (interval +
/// duration fit) never plans nothing on an unlucky draw.
pub fn plan(schedule: &Schedule, seed: u64, until: Duration) -> Vec<PlannedFault> {
    if let Some(steps) = &schedule.timed {
        let fitting: Vec<PlannedFault> = steps
            .iter()
            .filter(|f| f.start + f.span() <= until)
            .cloned()
            .collect();
        return super::timed::compose_overlapping(fitting);
    }
    let mut out: Vec<PlannedFault> = Vec::new();
    for mut f in Planner::new(schedule, seed) {
        if f.start + f.span() <= until {
            out.push(f);
            continue;
        }
        let timing = schedule.timing;
        let free = out.last().map_or(Duration::ZERO, |p| p.start + p.span());
        f.quiet = out
            .last()
            .map_or(Duration::ZERO, |p| p.template.quiet_after);
        f.gap = timing.shortest(schedule.interval).max(f.quiet);
        f.start = free + f.gap;
        f.duration = (f.template.duration_timing.unwrap_or(timing))
            .shortest(f.template.duration.unwrap_or(schedule.duration));
        if timing != super::timing::Timing::Fixed && f.start + f.span() <= until {
            out.push(f);
        }
        break;
    }
    out
}

/// [`plan`], then the next `reserve` faults of the same deal, planned past `until`: a
/// steering nemesis may bring one forward (it takes the time of the place it moves to; the
/// runner starts none past its window), so a short run can choose among a whole deal, not
/// only among the few faults that fit. A timed schedule's steps as written.
pub fn plan_ahead(
    schedule: &Schedule,
    seed: u64,
    until: Duration,
    reserve: usize,
) -> Vec<PlannedFault> {
    let mut out = plan(schedule, seed, until);
    if schedule.timed.is_none() {
        let n = out.len();
        out.extend(Planner::new(schedule, seed).skip(n).take(reserve));
    }
    out
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
    fn every_deck_deals_each_entry_exactly_its_weight() {
        let mut s = Schedule::from_flags(
            "kill,pause,partition",
            Duration::from_millis(1),
            Duration::from_millis(1),
        )
        .unwrap();
        s.faults[0].weight = 3;
        s.faults[2].weight = 2;
        let kinds: Vec<FaultKind> = Planner::new(&s, 5)
            .take(6 * 20)
            .map(|f| f.template.kind)
            .collect();
        let mut orders = std::collections::BTreeSet::new();
        for deck in kinds.chunks(6) {
            let count = |k| deck.iter().filter(|&&d| d == k).count();
            assert_eq!(
                (
                    count(FaultKind::Kill),
                    count(FaultKind::Pause),
                    count(FaultKind::Partition)
                ),
                (3, 1, 2),
                "{deck:?}"
            );
            // Breadth first: the three entries, then the two that weigh 2 or more, then the
            // kill again.
            let first: std::collections::BTreeSet<_> = deck[..3].iter().collect();
            assert_eq!(first.len(), 3, "{deck:?}");
            assert!(deck[3..5].contains(&FaultKind::Kill), "{deck:?}");
            assert!(deck[3..5].contains(&FaultKind::Partition), "{deck:?}");
            assert_eq!(deck[5], FaultKind::Kill, "{deck:?}");
            orders.insert(deck.to_vec());
        }
        assert!(
            orders.len() > 5,
            "the order within a deck is drawn: {orders:?}"
        );
    }

    #[test]
    fn a_five_minute_mixed_run_deals_every_entry_and_the_aimed_ones_twice() {
        // A 5-minute plan holds 25-42 faults and mixed has 23 entries: the first round of its
        // deck is always dealt. The entries aimed at one bug weigh 2 or more; their second
        // round mostly follows. More entries (or a shorter window) would leave some out again.
        let mixed = crate::nemesis::catalogue::load("mixed").unwrap();
        let window = fault_window(Duration::from_secs(300));
        let plans: Vec<Vec<PlannedFault>> = (0..100).map(|s| plan(&mixed, s, window)).collect();
        for f in &mixed.faults {
            let dealt = |times: usize| {
                (plans.iter())
                    .filter(|p| p.iter().filter(|q| q.template == *f).count() >= times)
                    .count()
            };
            let name = f.group_name().unwrap_or_else(|| format!("{:?}", f.kind));
            assert_eq!(
                dealt(1),
                100,
                "{name} left out of some seeds' 5-minute plans"
            );
            if f.weight >= 2 {
                assert!(dealt(2) >= 80, "{name} dealt twice in {} of 100", dealt(2));
            }
        }
    }

    #[test]
    fn quiet_after_holds_the_next_fault_back_and_a_part_cannot_have_one() {
        let s = Schedule::from_toml(
            "t",
            "interval = \"1s\"\nduration = \"1s\"\ntiming = \"exponential\"\n[[fault]]\nkind = \"kill\"\nquiet_after = \"6s\"\n[[fault]]\nkind = \"pause\"\n",
        )
        .unwrap();
        let p = plan(&s, 4, Duration::from_secs(600));
        let mut held = 0;
        for pair in p.windows(2) {
            // The quiet (what a triggered fault waits before it watches) is the kill's, exactly.
            let quiet = pair[0].template.quiet_after;
            assert_eq!(pair[1].quiet, quiet);
            if pair[0].template.kind == FaultKind::Kill {
                assert!(pair[1].gap >= Duration::from_secs(6), "{:?}", pair[1].gap);
                held += 1;
            }
        }
        assert!(held > 10, "{held} kills followed by a fault");
        // Pauses are not held: their gaps are drawn around the 1 s interval.
        let after_pause = p
            .windows(2)
            .filter(|w| w[0].template.kind == FaultKind::Pause)
            .filter(|w| w[1].gap < Duration::from_secs(6))
            .count();
        assert!(after_pause > 10, "{after_pause}");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"kill\"\n[[fault.with]]\nkind = \"pause\"\nquiet_after = \"1s\"\n",
        )
        .unwrap_err();
        assert!(err.contains("quiet_after"), "{err}");
    }

    #[test]
    fn random_timing_varies_gaps_and_durations_and_replays() {
        let mut s = mixed();
        s.timing = crate::nemesis::timing::Timing::Exponential;
        let a = plan(&s, 3, Duration::from_secs(300));
        assert_eq!(a, plan(&s, 3, Duration::from_secs(300)));
        let gaps: std::collections::BTreeSet<_> = a.iter().map(|f| f.gap).collect();
        let durations: std::collections::BTreeSet<_> = a.iter().map(|f| f.duration).collect();
        assert!(
            gaps.len() > a.len() / 2 && durations.len() > a.len() / 2,
            "{a:?}"
        );
        for pair in a.windows(2) {
            assert_eq!(pair[1].start, pair[0].start + pair[0].span() + pair[1].gap);
        }
    }

    #[test]
    fn a_fault_with_fixed_timing_keeps_its_duration_under_random_timing() {
        let s = Schedule::from_toml(
            "t",
            "interval = \"2s\"\nduration = \"4s\"\ntiming = \"exponential\"\n[[fault]]\nkind = \"kill\"\n[[fault]]\nkind = \"pause\"\nduration = \"7s\"\ntiming = \"fixed\"\n",
        )
        .unwrap();
        let p = plan(&s, 2, Duration::from_secs(600));
        let (fixed, drawn): (Vec<_>, Vec<_>) =
            p.iter().partition(|f| f.template.kind == FaultKind::Pause);
        assert!(!fixed.is_empty() && !drawn.is_empty());
        assert!(fixed.iter().all(|f| f.duration == Duration::from_secs(7)));
        let kills: std::collections::BTreeSet<_> = drawn.iter().map(|f| f.duration).collect();
        assert!(kills.len() > 1, "the others are still drawn: {kills:?}");
        let err = Schedule::from_toml(
            "t",
            "[[fault]]\nkind = \"kill\"\ncompose = \"c\"\n[[fault.with]]\nkind = \"pause\"\ntiming = \"fixed\"\n",
        )
        .unwrap_err();
        assert!(err.contains("never drawn"), "{err}");
        let err = Schedule::from_toml("t", "[[fault]]\nkind = \"kill\"\ntiming = \"often\"\n")
            .unwrap_err();
        assert!(err.contains("often") && err.contains("fixed"), "{err}");
    }

    #[test]
    fn composed_parts_are_planned_inside_their_fault() {
        let s = Schedule::from_toml(
            "t",
            "interval = \"2s\"\nduration = \"4s\"\n[[fault]]\nkind = \"partition\"\nshape = \"halves\"\n[[fault.with]]\nkind = \"kill\"\ntarget = \"leader\"\nafter = \"3s\"\nduration = \"2s\"\n",
        )
        .unwrap();
        let p = plan(&s, 1, Duration::from_secs(30));
        assert_eq!(p[0].parts.len(), 1);
        assert_eq!(p[0].span(), Duration::from_secs(5));
        assert_eq!(p[1].start, p[0].start + Duration::from_secs(5 + 2));
        assert_eq!(p[0].annotations["composed"], "partition+kill");
        assert_eq!(p[0].parts[0].annotations["composed"], "partition+kill");
        assert_eq!(s.kinds(), vec![FaultKind::Partition, FaultKind::Kill]);
    }

    #[test]
    fn mixed_plans_a_fault_for_every_seed_at_the_shortest_time_limit() {
        // Preflight accepts mixed from --time-limit 10; random draws must not leave such a
        // run without faults, nor plan one past the window.
        let mut mixed = crate::nemesis::catalogue::load("mixed").unwrap();
        // As a run does: preflight first leaves out the entries whose mean cannot fit (the
        // every-node strobe, a fixed 10 s since session 7), then the rest is planned.
        let left_out =
            crate::commands::run::preflight::fit_default(&mut mixed, Duration::from_secs(10));
        assert!(!left_out.is_empty() && !mixed.faults.is_empty());
        let window = fault_window(Duration::from_secs(10));
        for seed in 0..300 {
            let p = plan(&mixed, seed, window);
            assert!(!p.is_empty(), "seed {seed} plans nothing in {window:?}");
            let last = p.last().unwrap();
            assert!(last.start + last.span() <= window, "seed {seed}: {last:?}");
        }
    }

    #[test]
    fn no_faults_no_plan() {
        assert!(plan(&Schedule::none(), 1, Duration::from_secs(60)).is_empty());
    }
}
