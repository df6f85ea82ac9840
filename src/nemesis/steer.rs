//! Steering: before each fault, the scheduled nemesis may bring forward a later fault of its
//! seeded plan that aims at a situation (`history::situation`) the run has not met yet. What a
//! fault aims at is read off its template: its kind, and whom its target names (the leader, a
//! follower, a minority, the followers ...; a random node names nobody in particular). A fault
//! scores one for each aim of its own and of its composed parts that no situation met so far
//! has; the highest score within the next [`lookahead`] faults goes next, the earliest in
//! plan order on a tie (the plan's order is the seeded shuffle, so ties stay random), and the
//! plan's own next fault when nothing scores. Aims that neither the run nor the runs before it
//! met (`Seen::before`: a sweep's, earlier nights') count first, the run's own second. Before
//! novelty, goals: a fault whose entry names the situation it is there to meet
//! (`[fault.goal]`, `super::goal`) goes first while no fault of that entry has met it and the
//! run can (a goal after an ACK needs a workload that writes), the least tried goal first.
//! The choice is a pure function of the seed, of what
//! the history showed and of `Seen::before`; every fault is still recorded as it was applied,
//! so a run is replayed and shrunk from its history as before. `--nemesis-strategy random`
//! keeps the plan's order.

use super::goal::Goal;
use super::schedule::{PlannedFault, TargetSpec};
use crate::history::situation::{Situation, Who};
use crate::history::FaultKind;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

/// How the scheduled nemesis orders its faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Toward situations the run has not met yet (ties and the rest in seeded order).
    #[default]
    Steered,
    /// The seeded plan's order, as drawn.
    Random,
}

impl Strategy {
    pub fn word(self) -> &'static str {
        match self {
            Strategy::Steered => "steered",
            Strategy::Random => "random",
        }
    }
}

/// How far ahead a choice looks: one deal of the deck (every entry of the schedule once).
pub fn lookahead(entries: usize) -> usize {
    entries.max(1)
}

/// What one fault or part aims at: its kind and, when its target names it, whom.
pub type Aim = (FaultKind, Option<Who>);

/// Whom a target names, when it names a role (a random node names nobody in particular).
pub fn named_by(target: &TargetSpec) -> Option<Who> {
    match target {
        TargetSpec::Leader => Some(Who::Leader),
        TargetSpec::Follower => Some(Who::Follower),
        TargetSpec::Followers | TargetSpec::Majority => Some(Who::Quorum),
        TargetSpec::Minority | TargetSpec::FollowersLow | TargetSpec::FollowersHigh => {
            Some(Who::Minority)
        }
        _ => None,
    }
}

/// The aims of a planned fault: its own, then its parts'.
pub fn aims(f: &PlannedFault) -> Vec<Aim> {
    std::iter::once(&f.template)
        .chain(f.parts.iter().map(|p| &p.template))
        .map(|t| (t.kind, super::faults::of(t.kind).whom(t)))
        .collect()
}

/// How many of `f`'s aims no situation in `met` has.
pub fn novelty(f: &PlannedFault, met: &BTreeSet<Situation>) -> usize {
    aims(f)
        .into_iter()
        .filter(|&(kind, who)| {
            !met.iter()
                .any(|s| s.kind == kind && who.is_none_or(|w| s.who == w))
        })
        .count()
}

/// How many faults a run spends on one goal: a fault can land in another situation than its
/// goal (an election had just ended), so a missed goal is tried again, but not forever.
pub const GOAL_TRIES: usize = 3;

/// The annotation the runner leaves on a fault with a goal once it is undone: whether it (or
/// a composed part) met its goal.
pub const GOAL_MET: &str = "goal_met";

/// The index, within `upcoming` (the plan's next faults, in order), of the fault to deal for
/// its goal (`super::goal`): of the goals still open (reachable, no fault of its entry in
/// `done` met it, tried fewer than [`GOAL_TRIES`] times), the least tried, so every goal gets
/// its first try before any gets a second; among equals, one that needs client writes (the
/// ACK-before-durable class: a run whose cluster does not settle between faults has room for
/// fewer than `mixed`'s nine goals in 60 s, and these the election workload can never meet, so
/// a writes run meets them whatever its seed),
/// then one whose situation the runs before (`before`: a sweep's, earlier nights') never met,
/// so a sweep's runs take turns, then the earliest. A goal is its entry's: a fault of another
/// entry meeting the same situation does not close it (its parts, shape or trigger are not the
/// ones the goal's entry brings). `writes`: the workload writes.
pub fn open_goal(
    done: &[PlannedFault],
    upcoming: &[PlannedFault],
    before: &BTreeSet<Situation>,
    writes: bool,
    room: Duration,
) -> Option<usize> {
    let of = |g: &Goal| -> Vec<&PlannedFault> {
        (done.iter())
            .filter(|f| f.template.goal.as_ref() == Some(g))
            .collect()
    };
    let tries = |g: &Goal| {
        (of(g).iter())
            .filter(|f| f.annotations.contains_key("goal"))
            .count()
    };
    let met = |g: &Goal| (of(g).iter()).any(|f| f.annotations.get(GOAL_MET) == Some(&true.into()));
    (upcoming.iter().enumerate())
        .filter(|(_, f)| f.span() <= room)
        .filter_map(|(i, f)| Some((i, f.template.goal.as_ref()?)))
        .filter(|(_, g)| g.reachable(writes) && !met(g) && tries(g) < GOAL_TRIES)
        .min_by_key(|&(i, g)| {
            let met_before = before.iter().any(|s| g.met_by(s));
            (tries(g), !g.needs_writes(), met_before, i)
        })
        .map(|(i, _)| i)
}

/// The index, within `upcoming`, of the first fault of the highest novelty: first against
/// what neither this run (`met`) nor the runs before it (`before`: a sweep's, earlier
/// nights') met, then against the run's own; 0 (the plan's own next) when nothing scores.
pub fn choose(
    upcoming: &[PlannedFault],
    met: &BTreeSet<Situation>,
    before: &BTreeSet<Situation>,
    room: Duration,
) -> usize {
    let everywhere: BTreeSet<Situation> = met.union(before).cloned().collect();
    let mut best = (0, (0, 0));
    for (i, f) in upcoming.iter().enumerate() {
        if f.span() > room {
            continue;
        }
        let score = (novelty(f, &everywhere), novelty(f, met));
        if score > best.1 {
            best = (i, score);
        }
    }
    best.0
}

/// What a choice is made from.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The situations this run met so far.
    pub met: &'a BTreeSet<Situation>,
    /// Those met before it (`--met-before`).
    pub before: &'a BTreeSet<Situation>,
    /// Whether its workload writes (goals after an ACK need writes).
    pub writes: bool,
    /// How long the fault window still holds after this place's gap: a fault whose span is
    /// longer is not chosen (a short run ends on the goals that still fit, not on the first
    /// that does not).
    pub room: Duration,
    /// The same for a fault dealt for its goal, which starts as soon as the cluster settled
    /// again (the runner's shortest gap after the fault before).
    pub goal_room: Duration,
    /// The longest gap before a fault dealt for its goal (the schedule's `interval`): what a
    /// short run has no time to wait for is not left behind an exponential draw's long tail.
    /// Only a triggered one waits its gap (its trigger's wait counts from it); the rest start
    /// once the cluster settled (the runner).
    pub goal_gap: Duration,
}

/// Brings forward to place `i` of `planned` the first later fault with an open goal
/// ([`open_goal`]), else the one of the next `ahead` that [`choose`] picks, recorded as
/// `steered` (how many places it moved) and, when its goal chose it, `goal`. Only faults that
/// fit their room are chosen. The times stay with the places: it takes place `i`'s start and
/// gap (for a goal's fault at most `seen.goal_gap`), the gap at least the `quiet_after` of
/// the fault that ran before it (`prev_quiet`), and `seen.goal_room` is the room a goal's
/// fault must fit.
pub fn bring_forward(
    planned: &mut [PlannedFault],
    i: usize,
    ahead: usize,
    seen: Seen<'_>,
    prev_quiet: Duration,
) {
    let end = (i + ahead).min(planned.len());
    let goal = open_goal(
        &planned[..i],
        &planned[i..],
        seen.before,
        seen.writes,
        seen.goal_room,
    );
    let j = i + goal.unwrap_or_else(|| choose(&planned[i..end], seen.met, seen.before, seen.room));
    if let Some(g) = goal.and(planned[j].template.goal.as_ref()) {
        let label = g.label();
        planned[j].annotations.insert("goal".into(), label.into());
    }
    if j > i {
        let times: Vec<_> = planned[i..=j].iter().map(|f| (f.start, f.gap)).collect();
        planned[i..=j].rotate_right(1);
        for (f, (start, gap)) in planned[i..=j].iter_mut().zip(times) {
            (f.start, f.gap) = (start, gap);
        }
        planned[i]
            .annotations
            .insert("steered".into(), (j - i).into());
    }
    // Its predecessor may have moved too.
    let f = &mut planned[i];
    if goal.is_some() {
        f.gap = f.gap.min(seen.goal_gap);
    }
    f.quiet = prev_quiet;
    f.gap = f.gap.max(prev_quiet);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::situation::Phase;
    use crate::nemesis::plan::plan;
    use crate::nemesis::schedule::Schedule;

    static NOTHING: BTreeSet<Situation> = BTreeSet::new();
    /// Room for anything (the window is not what these tests are about).
    const ROOM: Duration = Duration::from_secs(3600);

    fn seen(met: &BTreeSet<Situation>, writes: bool) -> Seen<'_> {
        Seen {
            met,
            before: &NOTHING,
            writes,
            room: ROOM,
            goal_room: ROOM,
            goal_gap: ROOM,
        }
    }

    fn situation(kind: FaultKind, who: Who) -> Situation {
        Situation {
            kind,
            who,
            phase: Phase::Broadcast,
            with: vec![],
        }
    }

    fn schedule() -> Schedule {
        Schedule::from_toml(
            "steer",
            r#"
interval = "5s"
duration = "2s"
[[fault]]
kind = "kill"
target = "leader"
[[fault]]
kind = "kill"
target = "follower"
[[fault]]
kind = "pause"
target = "random"
"#,
        )
        .unwrap()
    }

    #[test]
    fn the_first_fault_aiming_at_something_unmet_goes_next() {
        let s = schedule();
        let p = plan(&s, 7, Duration::from_secs(60));
        let ahead = &p[..lookahead(s.faults.len())];
        // Nothing met: everything is new, the plan's own next fault goes.
        assert_eq!(choose(ahead, &BTreeSet::new(), &BTreeSet::new(), ROOM), 0);
        // Every aim met but a pause: the first pause ahead goes.
        let all_but_pause: BTreeSet<Situation> = [
            situation(FaultKind::Kill, Who::Leader),
            situation(FaultKind::Kill, Who::Follower),
        ]
        .into();
        let i = choose(ahead, &all_but_pause, &BTreeSet::new(), ROOM);
        assert_eq!(ahead[i].template.kind, FaultKind::Pause, "{ahead:?}");
        assert!(ahead[..i]
            .iter()
            .all(|f| f.template.kind != FaultKind::Pause));
        // A pause of anyone met the random pause's aim: nothing is new, the plan's order holds.
        let mut everything = all_but_pause.clone();
        everything.insert(situation(FaultKind::Pause, Who::Lagging));
        assert_eq!(choose(ahead, &everything, &BTreeSet::new(), ROOM), 0);
    }

    #[test]
    fn what_earlier_runs_met_counts_after_what_this_run_met() {
        let s = schedule();
        let p = plan(&s, 7, Duration::from_secs(60));
        let ahead = &p[..lookahead(s.faults.len())];
        // The run met nothing; earlier runs met both kills: the pause is new everywhere.
        let kills: BTreeSet<Situation> = [
            situation(FaultKind::Kill, Who::Leader),
            situation(FaultKind::Kill, Who::Follower),
        ]
        .into();
        let i = choose(ahead, &BTreeSet::new(), &kills, ROOM);
        assert_eq!(ahead[i].template.kind, FaultKind::Pause, "{ahead:?}");
        // Everything met before: the run's own novelty decides (nothing met: the plan's next).
        let mut all = kills.clone();
        all.insert(situation(FaultKind::Pause, Who::Lagging));
        assert_eq!(choose(ahead, &BTreeSet::new(), &all, ROOM), 0);
    }

    #[test]
    fn a_composed_fault_scores_its_parts_too() {
        let s = Schedule::from_toml(
            "steer",
            r#"
interval = "5s"
duration = "4s"
[[fault]]
kind = "kill"
target = "leader"
[[fault]]
kind = "partition"
shape = "isolate-leader"
[[fault.with]]
kind = "power-loss"
target = "followers"
after = "1s"
duration = "2s"
"#,
        )
        .unwrap();
        let p = plan(&s, 1, Duration::from_secs(60));
        let ahead = &p[..2];
        let seen: BTreeSet<Situation> = [situation(FaultKind::Partition, Who::Leader)].into();
        let composed = ahead.iter().position(|f| !f.parts.is_empty()).unwrap();
        assert_eq!(novelty(&ahead[composed], &seen), 1, "the power loss is new");
        let seen_kill: BTreeSet<Situation> = [situation(FaultKind::Kill, Who::Leader)].into();
        assert_eq!(
            ahead[choose(ahead, &seen_kill, &BTreeSet::new(), ROOM)]
                .parts
                .len(),
            1
        );
    }

    #[test]
    fn an_open_goal_goes_first_whatever_the_seed_until_a_fault_met_it() {
        let s = Schedule::from_toml(
            "steer",
            r#"
interval = "5s"
duration = "4s"
[[fault]]
kind = "kill"
target = "leader"
[[fault]]
kind = "pause"
target = "follower"
[[fault]]
kind = "partition"
shape = "isolate-leader"
[fault.goal]
kind = "power-loss"
who = "quorum"
phase = "after-ack"
with = ["leader-cut"]
[[fault.with]]
kind = "power-loss"
target = "followers"
duration = "2s"
"#,
        )
        .unwrap();
        let ahead = lookahead(s.faults.len());
        let none = BTreeSet::new();
        let mut moved = 0;
        for seed in 1..=20 {
            let mut planned = plan(&s, seed, Duration::from_secs(60));
            moved += usize::from(planned[0].template.goal.is_none());
            bring_forward(&mut planned, 0, ahead, seen(&none, true), Duration::ZERO);
            assert!(planned[0].template.goal.is_some(), "seed {seed}");
            assert_eq!(
                planned[0].annotations["goal"],
                "power-loss · quorum · after an ACK · with leader cut off"
            );
            // Without client writes there is no ACK: novelty alone, as if no goal were set.
            let mut quiet = plan(&s, seed, Duration::from_secs(60));
            let mut no_goal = quiet.clone();
            no_goal.iter_mut().for_each(|f| f.template.goal = None);
            bring_forward(&mut quiet, 0, ahead, seen(&none, false), Duration::ZERO);
            bring_forward(&mut no_goal, 0, ahead, seen(&none, false), Duration::ZERO);
            assert_eq!(quiet[0].pick, no_goal[0].pick);
            assert!(!quiet[0].annotations.contains_key("goal"));
        }
        assert!(
            moved > 0,
            "no seed put the goal elsewhere: the test proves nothing"
        );
        // Met by a fault of its entry (the runner's mark): novelty decides again.
        let planned = plan(&s, 3, Duration::from_secs(60));
        let mut tried = planned.clone();
        tried.retain(|f| f.template.goal.is_some());
        tried.truncate(1);
        tried[0].annotations.insert("goal".into(), "tried".into());
        let mut met = tried.clone();
        met[0].annotations.insert(GOAL_MET.into(), true.into());
        assert_eq!(open_goal(&met, &planned, &none, true, ROOM), None);
        // Missed GOAL_TRIES times: the run moves on.
        tried[0].annotations.insert(GOAL_MET.into(), false.into());
        let tried = vec![tried[0].clone(); GOAL_TRIES];
        assert!(open_goal(&tried[..GOAL_TRIES - 1], &planned, &none, true, ROOM).is_some());
        assert_eq!(open_goal(&tried, &planned, &none, true, ROOM), None);
    }

    /// A deck of a kill aimed at nobody and two goals: a kill of the leader, a cut of it.
    const TWO_GOALS: &str = r#"
interval = "5s"
duration = "4s"
[[fault]]
kind = "kill"
target = "random"
[[fault]]
kind = "kill"
target = "leader"
[fault.goal]
kind = "kill"
who = "leader"
[[fault]]
kind = "partition"
shape = "leader-minority"
[fault.goal]
kind = "partition"
who = "leader"
"#;

    #[test]
    fn every_open_goal_is_tried_once_before_any_twice() {
        let s = Schedule::from_toml("goals", TWO_GOALS).unwrap();
        let planned = plan(&s, 7, Duration::from_secs(60));
        let none = BTreeSet::new();
        let first = open_goal(&[], &planned, &none, true, ROOM).expect("two open goals");
        let goal = planned[first].template.goal.clone();
        // Tried once and missed: the other goal goes next, wherever the plan put it.
        let mut done = vec![planned[first].clone()];
        done[0].annotations.insert("goal".into(), "tried".into());
        done[0].annotations.insert(GOAL_MET.into(), false.into());
        let rest: Vec<PlannedFault> = planned[first + 1..].to_vec();
        let next = open_goal(&done, &rest, &none, true, ROOM).expect("the other goal");
        assert_ne!(rest[next].template.goal, goal);
        // Met by the runs before: the other goal goes first (a sweep's runs take turns).
        let met_kill: BTreeSet<Situation> = [situation(FaultKind::Kill, Who::Leader)].into();
        let met_cut: BTreeSet<Situation> = [situation(FaultKind::Partition, Who::Leader)].into();
        let kinds = |before: &BTreeSet<Situation>| {
            let i = open_goal(&[], &planned, before, true, ROOM).unwrap();
            planned[i].template.goal.as_ref().unwrap().kind
        };
        assert_eq!(kinds(&met_kill), FaultKind::Partition);
        assert_eq!(kinds(&met_cut), FaultKind::Kill);
        // Room for the partition (4 s) and not the kill (drawn longer here): the one that fits.
        let mut sized = planned.clone();
        for f in &mut sized {
            f.duration = match f.template.kind {
                FaultKind::Kill => Duration::from_secs(9),
                _ => Duration::from_secs(4),
            };
        }
        let i = open_goal(&[], &sized, &none, true, Duration::from_secs(5)).unwrap();
        assert_eq!(sized[i].template.kind, FaultKind::Partition);
        assert_eq!(
            open_goal(&[], &sized, &none, true, Duration::from_secs(3)),
            None
        );
        // A fault of another entry meeting the same situation does not close a goal.
        let mut other = planned.clone();
        other.retain(|f| f.template.goal.is_none());
        other[0].annotations.insert(GOAL_MET.into(), true.into());
        assert!(open_goal(&other[..1], &planned, &none, true, ROOM).is_some());
    }

    /// A goal only a writes run can meet goes first in such a run, whatever the seed's order;
    /// under the election workload it is not pursued at all.
    #[test]
    fn a_goal_that_needs_writes_goes_first_in_a_writes_run() {
        let toml = format!(
            "{TWO_GOALS}{}",
            r#"
[[fault]]
kind = "power-loss"
target = "followers"
[fault.goal]
kind = "power-loss"
phase = "after-ack"
"#
        );
        let s = Schedule::from_toml("goals", &toml).unwrap();
        let none = BTreeSet::new();
        let mut firsts = BTreeSet::new();
        for seed in 1..=20 {
            let planned = plan(&s, seed, Duration::from_secs(60));
            let kind_of = |writes| {
                let i = open_goal(&[], &planned, &none, writes, ROOM).unwrap();
                planned[i].template.kind
            };
            assert_eq!(kind_of(true), FaultKind::PowerLoss, "seed {seed}");
            firsts.insert(kind_of(false));
        }
        assert!(!firsts.contains(&FaultKind::PowerLoss), "{firsts:?}");
        assert_eq!(firsts.len(), 2, "without writes the seed orders the rest");
    }

    /// Steers a whole plan as the runner does, each fault meeting what it aimed at (or, aimed
    /// at nobody, a random node: `lagging`), and returns the kinds and targets in run order.
    fn steered_run(s: &Schedule, seed: u64) -> Vec<String> {
        let mut planned = plan(s, seed, Duration::from_secs(120));
        let mut met = BTreeSet::new();
        let mut quiet = Duration::ZERO;
        let mut order = Vec::new();
        for i in 0..planned.len() {
            bring_forward(
                &mut planned,
                i,
                lookahead(s.faults.len()),
                seen(&met, true),
                quiet,
            );
            let f = &planned[i];
            quiet = f.template.quiet_after;
            for (kind, who) in aims(f) {
                met.insert(situation(kind, who.unwrap_or(Who::Lagging)));
            }
            order.push(format!(
                "{:?}@{:?}@{:?}",
                f.template.kind, f.template.target, f.start
            ));
        }
        order
    }

    #[test]
    fn same_seed_same_behaviour_same_faults_and_the_times_keep_their_places() {
        let s = schedule();
        let a = steered_run(&s, 11);
        assert_eq!(a, steered_run(&s, 11));
        assert_ne!(a, steered_run(&s, 12));
        // The plan's start times, in order, whatever moved.
        let starts: Vec<String> = (plan(&s, 11, Duration::from_secs(120)).iter())
            .map(|f| format!("{:?}", f.start))
            .collect();
        let steered: Vec<&str> = a.iter().map(|x| x.rsplit('@').next().unwrap()).collect();
        assert_eq!(steered, starts);
        // Steering keeps the deck's promise: every entry within the first deal.
        let first: BTreeSet<&str> = a[..3]
            .iter()
            .map(|x| x.rsplit_once('@').unwrap().0)
            .collect();
        assert_eq!(first.len(), 3, "{a:?}");
    }

    /// A goal's fault starts as soon as the cluster settled again, not after its drawn gap: the
    /// room it must fit is `goal_room`, the rest's `room` (a short run's last seconds go to a
    /// goal that fits them).
    #[test]
    fn a_goal_fits_the_room_left_after_the_shortest_gap() {
        let s = Schedule::from_toml(
            "steer",
            r#"
interval = "5s"
duration = "1s"
[[fault]]
kind = "kill"
target = "leader"
[[fault]]
kind = "partition"
shape = "isolate-leader"
duration = "6s"
timing = "fixed"
[fault.goal]
kind = "partition"
who = "leader"
"#,
        )
        .unwrap();
        let none = BTreeSet::new();
        let ahead = lookahead(s.faults.len());
        let room = |room, goal_room| Seen {
            room: Duration::from_secs(room),
            goal_room: Duration::from_secs(goal_room),
            ..seen(&none, true)
        };
        for seed in 1..=10 {
            let planned = plan(&s, seed, Duration::from_secs(60));
            let mut fits = planned.clone();
            bring_forward(&mut fits, 0, ahead, room(3, 7), Duration::ZERO);
            assert!(fits[0].template.goal.is_some(), "seed {seed}: {fits:?}");
            let mut too_long = planned.clone();
            bring_forward(&mut too_long, 0, ahead, room(60, 5), Duration::ZERO);
            // Not dealt for its goal (novelty may still pick it, after its drawn gap).
            assert!(!too_long[0].annotations.contains_key("goal"), "seed {seed}");
        }
    }
}
