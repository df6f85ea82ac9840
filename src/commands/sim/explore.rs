//! `fle-chaos simulate --explore`: exploration that learns from what each run reached, in place
//! of one fresh seed per run (greybox fuzzing, as Mallory and model-guided fuzzers of
//! distributed systems do).
//!
//! An input is a network seed and its faults: a fresh seed, run as `simulate` runs it (its plan,
//! steered), or a mutation of a kept input's faults, run at fixed times as a timed schedule.
//! Each run reports its coverage (`coverage.rs`: the servers' transitions and the cluster
//! states); an input that reached a key no earlier run reached is kept in the corpus. The next inputs are mostly mutations of kept
//! ones, parents chosen by how rare the keys they found still are: a fault moved, stretched,
//! aimed elsewhere, a partition given another shape, two inputs spliced at a time, a fault copied
//! in or dropped, the network re-seeded. A quarter of the inputs stay fresh seeds.
//!
//! Runs go in rounds of 16: the round's inputs are drawn from the corpus as it stood, run on
//! every core, and learnt from in input order (each as soon as those before it are done), so the
//! same `--seed` gives the same inputs, runs and corpus whatever `--parallel` and the threads'
//! timing.

use super::coverage::{Coverage, Seen};
use super::run::{simulate_covered, SimRun, SimSettings};
use crate::history::node_name;
use crate::nemesis::plan::{fault_window, plan};
use crate::nemesis::schedule::{FaultKind, PartitionShape, PlannedFault, TargetSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Runs per round: inputs drawn from the corpus as it stood before the round. Fixed, not per
/// core, so that `--parallel` changes the speed and never the inputs.
const ROUND: u64 = 16;
/// One input in this many is a fresh seed's plan, not a mutation.
const FRESH_ONE_IN: u32 = 4;
/// Corpus entries compared when choosing a parent (the rarest wins).
const TOURNAMENT: usize = 4;
/// The novelty curve's bucket: new keys per this many runs.
pub const CURVE_RUNS: u64 = 1000;

/// One explored input: the network seed and its faults.
#[derive(Debug, Clone)]
pub struct Input {
    pub seed: u64,
    pub steps: Vec<PlannedFault>,
    pub made: Made,
}

/// How an input was made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", tag = "made")]
pub enum Made {
    /// A fresh seed: it runs as `simulate` runs that seed (its plan steered), so that exploring
    /// starts where random seeds do; the input's `steps` keep its plan for mutations.
    Fresh,
    /// A kept input's faults, mutated: they run at their times as a timed schedule.
    Mutated {
        /// The kept input's run (0-based, in exploration order).
        parent: u64,
        /// The mutations applied, by name ("shift", "reseed").
        mutations: Vec<String>,
    },
}

impl std::fmt::Display for Made {
    /// "fresh", or "run 7 + shift, reseed".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Made::Fresh => write!(f, "fresh"),
            Made::Mutated { parent, mutations } => {
                write!(f, "run {parent} + {}", mutations.join(", "))
            }
        }
    }
}

/// An explored run's place and how its input was made, as the summary gives it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExploredRun {
    /// Its place in the exploration (0-based).
    pub run: u64,
    #[serde(flatten)]
    pub made: Made,
}

impl std::fmt::Display for ExploredRun {
    /// "run 41 (run 7 + shift, reseed)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {} ({})", self.run, self.made)
    }
}

/// A mutation of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    /// A fault starts earlier or later.
    Shift,
    /// A fault lasts shorter or longer.
    Stretch,
    /// A fault is aimed at another role or node.
    Retarget,
    /// A partition takes another shape.
    Reshape,
    /// The faults before a time from this input, after it from another.
    Splice,
    /// A fault of another input is copied in at a random time.
    Insert,
    /// A fault is left out.
    Drop,
    /// The same faults over another network seed (other delays, losses, orders).
    Reseed,
}

impl Mutation {
    /// With their relative weights.
    const ALL: [(Mutation, u32); 8] = [
        (Mutation::Shift, 3),
        (Mutation::Stretch, 1),
        (Mutation::Retarget, 2),
        (Mutation::Reshape, 1),
        (Mutation::Splice, 1),
        (Mutation::Insert, 1),
        (Mutation::Drop, 1),
        (Mutation::Reseed, 2),
    ];

    fn name(self) -> &'static str {
        match self {
            Mutation::Shift => "shift",
            Mutation::Stretch => "stretch",
            Mutation::Retarget => "retarget",
            Mutation::Reshape => "reshape",
            Mutation::Splice => "splice",
            Mutation::Insert => "insert",
            Mutation::Drop => "drop",
            Mutation::Reseed => "reseed",
        }
    }
}

/// A kept input and what it found first.
#[derive(Debug)]
struct Entry {
    /// The run (0-based, in exploration order) that reached something new.
    run: u64,
    input: Input,
    /// The keys no run had reached before it.
    found: Vec<u64>,
    /// How often it was chosen as a parent.
    picked: u32,
}

/// What an exploration learnt, for the summary.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Exploration {
    /// Inputs kept for reaching something new.
    pub corpus: usize,
    /// Distinct transitions and cluster states reached.
    pub transitions: usize,
    pub cluster_states: usize,
    /// New keys found in each `CURVE_RUNS` runs, in order (the last bucket may be partial).
    pub novelty: Vec<u64>,
}

/// The corpus and what every run so far reached.
pub struct Explorer {
    settings: SimSettings,
    window: Duration,
    rng: ChaCha8Rng,
    next_seed: u64,
    corpus: Vec<Entry>,
    seen: Seen,
    runs: u64,
    novelty: Vec<u64>,
}

impl Explorer {
    /// An empty corpus for `s`'s schedule; fresh inputs use seeds `first`, `first + 1`, ...
    pub fn new(s: &SimSettings, first: u64) -> Explorer {
        Explorer {
            settings: s.clone(),
            window: fault_window(s.time_limit),
            rng: ChaCha8Rng::seed_from_u64(first ^ 0x0e7b_1003),
            next_seed: first,
            corpus: Vec::new(),
            seen: Seen::default(),
            runs: 0,
            novelty: Vec::new(),
        }
    }

    /// The next input to run.
    pub fn next_input(&mut self) -> Input {
        if self.corpus.is_empty() || self.rng.gen_ratio(1, FRESH_ONE_IN) {
            return self.fresh();
        }
        let parent = self.choose_parent();
        self.corpus[parent].picked += 1;
        let mut input = self.corpus[parent].input.clone();
        let mut done: Vec<String> = Vec::new();
        let wanted = self.rng.gen_range(1..=3);
        // A mutation that does not apply (no partition to reshape) is drawn again.
        for _ in 0..4 * wanted {
            let m = self.draw_mutation();
            if self.mutate(&mut input, m) {
                done.push(m.name().to_string());
            }
            if done.len() == wanted {
                break;
            }
        }
        input.steps.sort_by_key(|f| f.start);
        drop_overlaps(&mut input.steps);
        input.made = Made::Mutated {
            parent: self.corpus[parent].run,
            mutations: done,
        };
        input
    }

    /// The settings that run `input`: a fresh seed's as they are, a mutation's faults as a
    /// timed schedule.
    pub fn settings_of(&self, input: &Input) -> SimSettings {
        let mut s = self.settings.clone();
        if input.made != Made::Fresh {
            s.schedule.timed = Some(input.steps.clone());
        }
        s
    }

    /// Learns from a finished run of `input`: keeps it when it reached a new key.
    pub fn learn(&mut self, input: &Input, coverage: &Coverage) {
        let found = self.seen.add(coverage);
        let bucket = (self.runs / CURVE_RUNS) as usize;
        if self.novelty.len() <= bucket {
            self.novelty.resize(bucket + 1, 0);
        }
        self.novelty[bucket] += found.len() as u64;
        if !found.is_empty() {
            self.corpus.push(Entry {
                run: self.runs,
                input: input.clone(),
                found,
                picked: 0,
            });
        }
        self.runs += 1;
    }

    pub fn summary(&self) -> Exploration {
        let transitions = self.seen.transitions();
        Exploration {
            corpus: self.corpus.len(),
            transitions,
            cluster_states: self.seen.len() - transitions,
            novelty: self.novelty.clone(),
        }
    }

    fn fresh(&mut self) -> Input {
        let seed = self.take_seed();
        let mut steps = plan(&self.settings.schedule, seed, self.window);
        // Timed: each fault starts at its time, not a drawn gap after the fault before it
        // (which a moved or copied fault would carry past the window's end).
        for f in &mut steps {
            f.gap = Duration::ZERO;
            self.fit(f);
        }
        Input {
            seed,
            steps,
            made: Made::Fresh,
        }
    }

    fn take_seed(&mut self) -> u64 {
        let seed = self.next_seed;
        self.next_seed = self.next_seed.wrapping_add(1);
        seed
    }

    /// The entry whose rarest find is the least reached by now, among a few drawn at random
    /// (ties: the one chosen least often).
    fn choose_parent(&mut self) -> usize {
        let mut best: Option<(usize, (u32, u32))> = None;
        for _ in 0..TOURNAMENT {
            let i = self.rng.gen_range(0..self.corpus.len());
            let e = &self.corpus[i];
            let rarest = e
                .found
                .iter()
                .map(|k| self.seen.runs(*k))
                .min()
                .unwrap_or(0);
            let score = (rarest, e.picked);
            if best.is_none_or(|(_, b)| score < b) {
                best = Some((i, score));
            }
        }
        best.map_or(0, |(i, _)| i)
    }

    fn draw_mutation(&mut self) -> Mutation {
        let total: u32 = Mutation::ALL.iter().map(|(_, w)| w).sum();
        let mut x = self.rng.gen_range(0..total);
        for (m, w) in Mutation::ALL {
            if x < w {
                return m;
            }
            x -= w;
        }
        Mutation::Shift
    }

    /// Applies `m` to `input`; false when it did not apply (no partition to reshape, say).
    fn mutate(&mut self, input: &mut Input, m: Mutation) -> bool {
        let n = input.steps.len();
        let pick = |rng: &mut ChaCha8Rng| rng.gen_range(0..n.max(1));
        match m {
            Mutation::Reseed => {
                input.seed = self.take_seed();
                true
            }
            _ if n == 0 && m != Mutation::Insert && m != Mutation::Splice => false,
            Mutation::Shift => {
                let i = pick(&mut self.rng);
                let reach = self.settings.schedule.interval.max(Duration::from_secs(1));
                let by = reach.mul_f64(self.rng.gen_range(0.0..1.0));
                let f = &mut input.steps[i];
                f.start = match self.rng.gen_bool(0.5) {
                    true => f.start.saturating_sub(by),
                    false => f.start + by,
                };
                self.fit(f);
                true
            }
            Mutation::Stretch => {
                let i = pick(&mut self.rng);
                let f = &mut input.steps[i];
                let by = self.rng.gen_range(0.3..2.5);
                f.duration = f.duration.mul_f64(by).max(Duration::from_millis(200));
                self.fit(f);
                true
            }
            Mutation::Retarget => {
                let i = pick(&mut self.rng);
                let target = self.draw_target();
                let f = &mut input.steps[i];
                let aimed = matches!(f.template.target, TargetSpec::Trigger);
                if aimed || f.template.kind == FaultKind::Partition {
                    return false;
                }
                f.template.target = target;
                f.pick = self.rng.gen();
                true
            }
            Mutation::Reshape => {
                let partitions: Vec<usize> = (0..n)
                    .filter(|&i| input.steps[i].template.kind == FaultKind::Partition)
                    .filter(|&i| input.steps[i].template.drops.is_none())
                    .collect();
                if partitions.is_empty() {
                    return false;
                }
                let i = partitions[self.rng.gen_range(0..partitions.len())];
                let shapes: Vec<PartitionShape> = (PartitionShape::ALL.into_iter())
                    .filter(|p| reshapes_to(*p))
                    .collect();
                let shape = shapes[self.rng.gen_range(0..shapes.len())];
                let t = &mut input.steps[i].template;
                t.shape = Some(shape);
                t.groups = None;
                input.steps[i].pick = self.rng.gen();
                true
            }
            Mutation::Splice => {
                let Some(other) = self.other_input() else {
                    return false;
                };
                let at = self.window.mul_f64(self.rng.gen_range(0.0..1.0));
                input.steps.retain(|f| f.start < at);
                input
                    .steps
                    .extend(other.steps.into_iter().filter(|f| f.start >= at));
                true
            }
            Mutation::Insert => {
                let Some(other) = self.other_input() else {
                    return false;
                };
                if other.steps.is_empty() {
                    return false;
                }
                let mut f = other.steps[self.rng.gen_range(0..other.steps.len())].clone();
                f.start = self.window.mul_f64(self.rng.gen_range(0.0..1.0));
                self.fit(&mut f);
                input.steps.push(f);
                true
            }
            Mutation::Drop => {
                if n < 2 {
                    return false;
                }
                input.steps.remove(pick(&mut self.rng));
                true
            }
        }
    }

    /// Another kept input, at random.
    fn other_input(&mut self) -> Option<Input> {
        if self.corpus.is_empty() {
            return None;
        }
        let i = self.rng.gen_range(0..self.corpus.len());
        Some(self.corpus[i].input.clone())
    }

    /// A role or one node to aim a fault at.
    fn draw_target(&mut self) -> TargetSpec {
        let roles = [
            TargetSpec::Leader,
            TargetSpec::Follower,
            TargetSpec::Random,
            TargetSpec::Minority,
            TargetSpec::Highest,
        ];
        let nodes = self.settings.nodes;
        match self.rng.gen_range(0..roles.len() + 1) {
            i if i < roles.len() => roles[i].clone(),
            _ => TargetSpec::Nodes(vec![node_name(self.rng.gen_range(1..=nodes as u64))]),
        }
    }

    /// Moves `f` back so that it ends within the fault window, shortened to half of it at
    /// most, its times in whole milliseconds (as its run's schedule.toml writes them, so that
    /// the file re-runs the same input).
    fn fit(&self, f: &mut PlannedFault) {
        let parts = f.span().saturating_sub(f.duration);
        f.duration = whole_ms(f.duration.min((self.window / 2).saturating_sub(parts)));
        for p in &mut f.parts {
            (p.start, p.duration) = (whole_ms(p.start), whole_ms(p.duration));
        }
        let span = f.span().min(self.window);
        f.start = whole_ms(f.start.min(self.window - span));
    }
}

/// Leaves out each fault (`steps` sorted by start) that would be in force beside a kept one
/// of the same kind, counting composed parts. Faults of different kinds may overlap (they
/// compose, as a kill inside a partition does); two partitions or two packet faults at once
/// are outside what the nemesis and the checkers' view agree on (a partition's undo heals
/// its nodes' rules on real processes, ends every partition in the view, and only its own
/// cuts in the simulated network).
fn drop_overlaps(steps: &mut Vec<PlannedFault>) {
    let mut kept: Vec<(Duration, Duration, FaultKind)> = Vec::new();
    steps.retain(|f| {
        let (from, to) = (f.start, f.start + f.span());
        let kinds: Vec<FaultKind> = (std::iter::once(f).chain(&f.parts))
            .map(|p| p.template.kind)
            .collect();
        let clash = (kept.iter()).any(|(a, b, k)| *a < to && from < *b && kinds.contains(k));
        if !clash {
            kept.extend(kinds.into_iter().map(|k| (from, to, k)));
        }
        !clash
    });
}

/// `d` cut to whole milliseconds.
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

/// Whether `reshape` may give a partition this shape: not `groups`, which needs its groups, nor
/// `isolate-observers`, which needs observers.
fn reshapes_to(shape: PartitionShape) -> bool {
    !matches!(
        shape,
        PartitionShape::Groups | PartitionShape::IsolateObservers
    )
}

/// One explored run, as handed to the caller.
pub struct Explored {
    /// Its place in the exploration (0-based).
    pub index: u64,
    pub input: Input,
    pub run: SimRun,
}

/// Explores up to `count` runs on `parallel` threads, while `go_on` (asked before each run
/// starts) says so; hands each run to `each` in exploration order as soon as the runs before
/// it are done; `each` returns false to stop (the runs in flight finish and are dropped).
/// Returns what the exploration learnt.
pub fn explore(
    s: &SimSettings,
    first: u64,
    count: u64,
    parallel: usize,
    go_on: impl Fn() -> bool + Sync,
    mut each: impl FnMut(Explored) -> bool,
) -> Exploration {
    let mut explorer = Explorer::new(s, first);
    let mut index = 0;
    while index < count && go_on() {
        let size = ROUND.min(count - index) as usize;
        let inputs: Vec<Input> = (0..size).map(|_| explorer.next_input()).collect();
        let settings: Vec<SimSettings> = inputs.iter().map(|i| explorer.settings_of(i)).collect();
        let mut hand = |i: usize, run: SimRun| {
            let empty = Coverage::default();
            explorer.learn(&inputs[i], run.coverage.as_ref().unwrap_or(&empty));
            let go = each(Explored {
                index,
                input: inputs[i].clone(),
                run,
            });
            index += 1;
            go
        };
        let (handed, stopped) = run_round(&inputs, &settings, parallel, &go_on, &mut hand);
        if stopped || handed < size {
            break;
        }
    }
    explorer.summary()
}

/// Runs a round's inputs on `parallel` threads and hands each finished run to `hand` in input
/// order (run i once runs 0..i are handed), so that the corpus learns the same whatever the
/// threads' timing. Returns how many were handed and whether `hand` said stop.
fn run_round(
    inputs: &[Input],
    settings: &[SimSettings],
    parallel: usize,
    go_on: &(impl Fn() -> bool + Sync),
    hand: &mut impl FnMut(usize, SimRun) -> bool,
) -> (usize, bool) {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (done, finished) = std::sync::mpsc::channel::<(usize, SimRun)>();
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, inputs.len().max(1)) {
            let done = done.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) && go_on() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(input) = inputs.get(i) else { return };
                    if done
                        .send((i, simulate_covered(&settings[i], input.seed)))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
        drop(done);
        let mut waiting: BTreeMap<usize, SimRun> = BTreeMap::new();
        let mut handed = 0;
        for (i, run) in finished.iter() {
            waiting.insert(i, run);
            while let Some(run) = waiting.remove(&handed) {
                handed += 1;
                if !hand(handed - 1, run) {
                    stop.store(true, Ordering::Relaxed);
                    return (handed, true);
                }
            }
        }
        (handed, false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::sim::cli::settings_of;

    fn small(flags: &[&str]) -> SimSettings {
        let mut words = vec![
            "--nodes",
            "3",
            "--time-limit",
            "12",
            "--nemesis-interval",
            "2",
        ];
        words.extend_from_slice(flags);
        settings_of(&words).unwrap()
    }

    /// What an exploration did, run by run: the input's seed, how it was made, its verdict and its
    /// history's length.
    fn trace(
        s: &SimSettings,
        count: u64,
        parallel: usize,
    ) -> (Vec<(u64, Made, String, usize)>, Exploration) {
        let mut runs = Vec::new();
        let learnt = explore(
            s,
            7,
            count,
            parallel,
            || true,
            |e| {
                let valid = e.run.results.valid.word().to_string();
                runs.push((e.input.seed, e.input.made, valid, e.run.history.len()));
                true
            },
        );
        (runs, learnt)
    }

    /// Same seed, same exploration: the inputs, their runs and the corpus depend neither on
    /// which thread ran what first nor on how many threads ran.
    #[test]
    fn the_same_seed_explores_the_same_inputs_and_learns_the_same_corpus() {
        let s = small(&[]);
        let (a, learnt_a) = trace(&s, 64, 2);
        let (b, learnt_b) = trace(&s, 64, 2);
        assert_eq!(a, b);
        assert_eq!(a, trace(&s, 64, 1).0);
        assert_eq!(a.len(), 64);
        assert_eq!(learnt_a.corpus, learnt_b.corpus);
        assert!(
            learnt_a.corpus > 0 && learnt_a.transitions > 10,
            "{learnt_a:?}"
        );
        assert_eq!(learnt_a.novelty.iter().sum::<u64>() as usize, {
            learnt_a.transitions + learnt_a.cluster_states
        });
        let mutated = a.iter().filter(|r| r.1 != Made::Fresh).count();
        // The first round (16) is fresh seeds; then three in four are mutations.
        assert!(
            mutated > 24,
            "most inputs are mutations of kept ones: {a:?}"
        );
        assert!(a.iter().all(|r| r.2 == "valid"), "the correct node: {a:?}");
    }

    /// Whatever the mutations, every fault of an input still ends within the fault window, no
    /// two of a kind are in force at once, and the first input is the plan of the first seed.
    #[test]
    fn mutated_inputs_keep_their_faults_within_the_window() {
        let s = small(&["--nemesis", "kill,pause,partition,clock"]);
        let mut x = Explorer::new(&s, 1);
        let first = x.next_input();
        assert_eq!(first.made, Made::Fresh);
        let planned = plan(&s.schedule, 1, x.window);
        assert_eq!(first.steps.len(), planned.len());
        assert!((first.steps.iter().zip(&planned)).all(|(a, b)| a.start == b.start));
        let mut coverage = Coverage::default();
        coverage.transition(0, 1, 0);
        x.learn(&first, &coverage);
        for i in 0..500 {
            let input = x.next_input();
            for f in &input.steps {
                assert!(f.start + f.span().min(x.window) <= x.window, "{i}: {f:?}");
            }
            for (j, a) in input.steps.iter().enumerate() {
                for b in &input.steps[j + 1..] {
                    let overlap = b.start < a.start + a.span();
                    let same = a.template.kind == b.template.kind;
                    assert!(!(overlap && same), "{i}: two {:?} at once", a.template.kind);
                }
            }
            let mut c = Coverage::default();
            c.transition(0, 1, (i % 7) as u8);
            x.learn(&input, &c);
        }
        assert_eq!(x.corpus.len(), 7, "one kept per new key");
    }

    /// A seeded bug is found by exploration too, and the failing run is an explored input's.
    #[test]
    fn exploration_finds_a_seeded_bug() {
        let s = settings_of(&[
            "--nodes",
            "3",
            "--bug",
            "follow-single-leading",
            "--time-limit",
            "30",
        ])
        .unwrap();
        let mut found = None;
        explore(
            &s,
            1,
            200,
            2,
            || true,
            |e| {
                if e.run.failed().contains(&"vote-rule".to_string()) {
                    found = Some(e.index);
                    return false;
                }
                true
            },
        );
        assert!(
            found.is_some(),
            "follow-single-leading not found in 200 explored runs"
        );
    }
}
