//! Checkers: each property of a run is one small checker that reads the history and returns a
//! verdict, a one-paragraph explanation and the minimal evidence, as Jepsen's checkers do.
//! `check_history` / `check_run` compose them into one verdict: false beats unknown beats true.
//! The checkers judge a compact `model::Digest` of the history (see `model` for why).

use serde::{Deserialize, Serialize};

pub mod ack_zxids;
pub mod availability;
pub mod cli;
pub mod crash;
pub mod divergence;
pub mod durability;
pub mod election_safety;
pub mod epoch_leaders;
pub mod epoch_monotonic;
pub mod faults;
pub mod finding;
pub mod fxhash;
pub mod kind;
pub mod known;
pub mod leader_completeness;
pub mod leader_stepdown;
pub mod linearizable;
pub mod load;
pub mod log_order;
pub mod membership;
pub mod model;
pub mod observers;
pub mod recovery;
pub mod registry;
pub mod session_order;
pub mod vote_rule;

pub use registry::{names, CHECKERS};

/// Jepsen's `valid?`: true, false or unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validity {
    True,
    False,
    Unknown,
}

impl Validity {
    /// Combines two verdicts: false beats unknown beats true.
    pub fn and(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (False, _) | (_, False) => False,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => True,
        }
    }

    /// The word every printed verdict uses (summary lines, `check`, reports): `valid`,
    /// `invalid` or `unknown`. results.json keeps Jepsen's `valid?` values (true/false/unknown).
    pub fn word(self) -> &'static str {
        match self {
            Validity::True => "valid",
            Validity::False => "invalid",
            Validity::Unknown => "unknown",
        }
    }

    /// The verdict an exit code says (any code but 0 and 1: unknown).
    pub fn of_exit_code(code: i32) -> Validity {
        match code {
            crate::exit::VALID => Validity::True,
            crate::exit::INVALID => Validity::False,
            _ => Validity::Unknown,
        }
    }

    /// The process exit code for this verdict (Jepsen's: 0 valid, 1 invalid, 2 unknown).
    pub fn exit_code(self) -> i32 {
        match self {
            Validity::True => crate::exit::VALID,
            Validity::False => crate::exit::INVALID,
            Validity::Unknown => crate::exit::UNKNOWN,
        }
    }
}

/// One checker's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    /// The checker's name ("election-safety", "durability", ...).
    pub name: String,
    pub valid: Validity,
    /// One paragraph a person can read.
    pub explanation: String,
    /// The history events that prove the verdict; minimal.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// Measurements (recovery times, leaderless windows...), each checker's own type.
    #[serde(default)]
    pub measurements: Measurements,
    /// False when the target cannot give this checker its data at all (real ZooKeeper does not
    /// expose the votes it counted): the verdict stays unknown, with the reason, but does not
    /// count in the combined verdict.
    #[serde(default = "applicable_by_default", skip_serializing_if = "is_true")]
    pub applicable: bool,
    /// How many violations of each kind, for a checker that classifies them (`kind`).
    #[serde(default, skip_serializing_if = "kind::Kinds::is_empty")]
    pub kinds: kind::Kinds,
}

fn applicable_by_default() -> bool {
    true
}

impl CheckResult {
    /// How the verdict is shown to people: `n/a` for a checker that cannot judge this kind of
    /// run (results.json keeps its verdict and reason), else the verdict's word.
    pub fn shown(&self) -> &'static str {
        if self.applicable {
            self.valid.word()
        } else {
            NOT_APPLICABLE
        }
    }
}

/// The word shown for a checker that does not apply to the run.
pub const NOT_APPLICABLE: &str = "n/a";

fn is_true(b: &bool) -> bool {
    *b
}

/// One piece of evidence: why it matters, and the original history event (a final log is
/// trimmed around the entry that matters), with its time and node for display.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub why: String,
    /// The event as it is in the history (`{"position": N}` if it could not be re-read).
    pub event: serde_json::Value,
    /// The event's time (ns since the run started) and node, when it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl Evidence {
    /// Evidence quoting `event` (its time and node taken from it).
    pub fn quoting(why: impl Into<String>, event: serde_json::Value) -> Self {
        Evidence {
            why: why.into(),
            time_ns: event.get("time").and_then(|t| t.as_u64()),
            node: event
                .get("node")
                .and_then(|n| n.as_str())
                .map(str::to_string),
            event,
        }
    }
}

/// Its JSON, as results.json holds it.
impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}

/// A checker's measurements, typed per checker. In results.json each is the plain object of
/// its type (untagged, as before typing), `null` when a checker measured nothing; any other
/// JSON (an older or newer results.json) reads as `Other`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Measurements {
    Recovery(Box<recovery::RecoveryMeasurements>),
    ElectionSafety(election_safety::ElectionSafetyMeasurements),
    EpochMonotonic(epoch_monotonic::EpochMonotonicMeasurements),
    VoteRule(vote_rule::VoteRuleMeasurements),
    Durability(durability::DurabilityMeasurements),
    Stepdown(leader_stepdown::StepdownMeasurements),
    Completeness(leader_completeness::CompletenessMeasurements),
    AckZxids(ack_zxids::AckZxidsMeasurements),
    Linearizable(Box<linearizable::LinearizableMeasurements>),
    SessionOrder(session_order::SessionOrderMeasurements),
    #[default]
    None,
    Other(serde_json::Value),
}

impl Measurements {
    pub fn is_none(&self) -> bool {
        matches!(self, Measurements::None)
    }

    pub fn recovery(&self) -> Option<&recovery::RecoveryMeasurements> {
        match self {
            Measurements::Recovery(m) => Some(m),
            _ => None,
        }
    }
}

impl CheckResult {
    /// The recovery checker's measurements, when this is it and it measured.
    pub fn recovery(&self) -> Option<&recovery::RecoveryMeasurements> {
        self.measurements.recovery()
    }
}

/// `results.json`: every checker's result and the combined verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub valid: Validity,
    pub checkers: Vec<CheckResult>,
    /// The situations the run's faults met (`history::situation`); None in results written
    /// before coverage was measured, or when the history could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// The published bugs that cover every invalid verdict (`known`); empty when the run is
    /// not invalid or any invalid verdict is not a known bug's shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<known::Known>,
    /// Known bugs whose shape the run shows on a release where they are fixed: the run is not
    /// known but plainly invalid (a regression, or a new bug), and these are what it resembles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resembles: Vec<known::Resemblance>,
}

impl Results {
    /// The verdict as a person reads it: "invalid (known: ZOOKEEPER-2846)" when every invalid
    /// verdict is a known bug's shape, else the verdict's word.
    pub fn verdict_words(&self) -> String {
        if !self.known.is_empty() {
            return format!("{} (known: {})", self.valid.word(), known::ids(&self.known));
        }
        if !self.resembles.is_empty() {
            let like: Vec<String> = (self.resembles.iter())
                .map(|r| format!("{}, fixed in {}", r.id, r.fixed_in.join(", ")))
                .collect();
            return format!("{} (new; resembles {})", self.valid.word(), like.join("; "));
        }
        self.valid.word().to_string()
    }
}

use crate::history::file::HistoryFile;
use crate::history::situation::Coverage;
use crate::history::test_info::TestInfo;
use crate::history::Event;
use crate::store::RunDir;
use anyhow::Result;
use load::Rider;
use std::path::Path;

/// Settings of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// How long after the final heal a quorum may take to agree on a leader; None: derived from
    /// the cluster's timing (`recovery::default_bound_ms`).
    pub recovery_bound_ms: Option<u64>,
    /// How old a status read's snapshot may be at its recorded (receive) time; orderings
    /// between reads of different nodes are only trusted beyond this margin. (Reads of one node
    /// are taken in order: an observer sends its next read only after the previous answer.)
    /// None: the observer's per-read timeout (test.json `settings.status_timeout_ms`: a late
    /// answer carries an old state), or `DEFAULT_READ_SLACK_MS` when the run does not say.
    /// A value given is used as given, below the timeout too.
    pub read_slack_ms: Option<u64>,
    /// leader-stepdown: how much longer than its Zab timeout (syncLimit·tickTime in broadcast)
    /// a leader without a quorum may still be seen LEADING; None: `tickTime` (ZooKeeper's leader
    /// checks its quorum every half tick) plus the read slack (its last LEADING read may be that
    /// old), plus 500 ms for the observers' polling.
    pub stepdown_slack_ms: Option<u64>,
    /// linearizable: the states each key's search may keep before its verdict is unknown;
    /// None: `linearizable::DEFAULT_STATES`.
    pub linearizable_states: Option<u64>,
}

/// The read slack when neither the flag nor the run's settings give one.
pub const DEFAULT_READ_SLACK_MS: u64 = 50;

impl CheckOptions {
    /// These options resolved for a run: the read slack is the flag's, else the observer's
    /// read timeout from test.json, else `DEFAULT_READ_SLACK_MS`.
    pub fn for_run(&self, info: &TestInfo) -> CheckOptions {
        let slack = self
            .read_slack_ms
            .or(info.settings.status_timeout_ms)
            .unwrap_or(DEFAULT_READ_SLACK_MS);
        CheckOptions {
            read_slack_ms: Some(slack),
            ..self.clone()
        }
    }

    /// The read slack in ns (resolved by `for_run`).
    pub fn read_slack_ns(&self) -> u64 {
        self.read_slack_ms.unwrap_or(DEFAULT_READ_SLACK_MS) * 1_000_000
    }
}

/// Why a checker of client writes had nothing to judge, if it had nothing: no client writes
/// at all, or none acknowledged (a cluster that never took a write tested no durability, and
/// its empty logs are trivially in order). A gap, so such a run is unknown, never valid.
pub(crate) fn nothing_acknowledged(
    checker: &str,
    info: &TestInfo,
    writes: usize,
    acknowledged: usize,
) -> Option<finding::Item> {
    let why = if writes == 0 {
        format!(
            "The history has no client writes (workload \"{}\"), so {checker} cannot be judged.",
            info.workload
        )
    } else if acknowledged == 0 {
        format!("None of the {writes} client write events was acknowledged, so {checker} had nothing to judge (the cluster never took a write: see recovery).")
    } else {
        return None;
    };
    Some((why, vec![]))
}

/// Runs every checker on a digest; `quote` turns a history position into the original event.
pub fn check_digest(
    d: &model::Digest,
    info: &TestInfo,
    opts: &CheckOptions,
    mut quote: impl FnMut(u32) -> serde_json::Value,
) -> Results {
    let (findings, coverage) = registry::run_all(d, info, opts);
    let mut valid = Validity::True;
    let mut checkers = Vec::new();
    for (checker, mut f) in CHECKERS.iter().zip(findings) {
        let name = checker.name;
        let why_not = checker.needs.missing(info);
        match &why_not {
            None => valid = valid.and(f.valid),
            Some(why) => {
                f.explanation = format!(
                    "Not applicable: {why}, so the combined verdict leaves this checker out. {}",
                    f.explanation
                )
            }
        }
        let applicable = why_not.is_none();
        let evidence = f
            .evidence
            .iter()
            .map(|ev| {
                let mut event = quote(ev.pos);
                finding::trim_log(&mut event, ev.entry);
                Evidence::quoting(ev.why.clone(), event)
            })
            .collect();
        checkers.push(CheckResult {
            name: name.to_string(),
            valid: f.valid,
            explanation: f.explanation,
            evidence,
            measurements: f.measurements,
            applicable,
            kinds: f.kinds,
        });
    }
    let signatures = known::builtin();
    let known = known::explain(&checkers, info, &signatures);
    // A run a known bug explains resembles nothing else: the known finding says it all.
    let resembles = match known.is_empty() {
        true => known::resemblances(&checkers, info, &signatures),
        false => Vec::new(),
    };
    Results {
        valid,
        checkers,
        coverage: Some(coverage),
        known,
        resembles,
    }
}

/// Checks a history held in memory.
pub fn check_history(events: &[Event], info: &TestInfo, opts: &CheckOptions) -> Results {
    let opts = &opts.for_run(info);
    match model::digest_events(events, &info.nodes) {
        Ok(d) => check_digest(&d, info, opts, |pos| {
            serde_json::to_value(&events[pos as usize]).unwrap_or_default()
        }),
        // A history the checkers cannot read proves nothing either way.
        Err(why) => unreadable(why),
    }
}

pub(crate) fn unreadable(why: String) -> Results {
    let checkers = names()
        .map(|n| CheckResult {
            applicable: true,
            name: n.to_string(),
            valid: Validity::Unknown,
            explanation: format!("The history cannot be read: {why}"),
            evidence: vec![],
            measurements: Measurements::None,
            kinds: Default::default(),
        })
        .collect();
    Results {
        valid: Validity::Unknown,
        checkers,
        coverage: None,
        known: Vec::new(),
        resembles: Vec::new(),
    }
}

/// A run folder's test.json and digested history.
pub struct LoadedRun {
    pub info: TestInfo,
    pub digest: model::Digest,
    offsets: Vec<u64>,
    history: HistoryFile,
}

/// A run folder's test.json and opened history, before the one pass over it.
pub struct RunFiles {
    pub info: TestInfo,
    pub history: HistoryFile,
    /// How many parts the pass reads the history in (None: as `read::parts_for` says).
    pub parts: Option<usize>,
}

impl RunFiles {
    /// Reads the run's test.json and opens its history.
    pub fn open(run_dir: &RunDir) -> Result<RunFiles> {
        Ok(RunFiles {
            info: run_dir.info()?,
            history: HistoryFile::open(&run_dir.history())?,
            parts: None,
        })
    }

    /// The one pass: digests the history for the checkers, and feeds each part of the file
    /// (`load::digest_with`) to a rider `R` of its own too, so that another consumer of the
    /// history (the report) reads it in the same pass; the rider's parts are joined in file
    /// order.
    pub fn load<R: Rider>(self) -> Result<(LoadedRun, R::Joined)> {
        let empty = R::new(&self.info, &self.history)?;
        let RunFiles {
            info,
            history,
            parts,
        } = self;
        let (digest, offsets, riders) =
            load::digest_with(&history, &info.nodes, parts, || empty.clone(), R::line)?;
        // A node test.json does not list would be judged without its place in the quorum.
        if let Some(extra) = digest.nodes.iter().find(|n| !info.nodes.contains(n)) {
            anyhow::bail!(
                "{} names node {extra}, which test.json's nodes ({}) do not list: use the run's own test.json",
                history.path().display(),
                info.nodes.join(", ")
            );
        }
        let run = LoadedRun {
            info,
            digest,
            offsets,
            history,
        };
        Ok((run, empty.join(riders)))
    }
}

/// The one read of a stored run: its test.json and its history, digested for the checkers
/// with `R` riding along (`()`: nothing). A damaged test.json or history is the input's
/// fault, said in one line.
pub fn load_run<R: Rider>(run_dir: &RunDir) -> Result<(LoadedRun, R::Joined)> {
    RunFiles::open(run_dir)
        .and_then(RunFiles::load::<R>)
        .map_err(|e| {
            crate::exit::bad_input(format!(
                "{e:#} ({})",
                crate::history::file::RUN_FOLDER_NEEDS
            ))
        })
}

/// Checks a loaded run, quoting evidence from its history file.
pub fn check_loaded(run: &LoadedRun, opts: &CheckOptions) -> Results {
    let mut file = run.history.reader().ok().map(std::io::BufReader::new);
    let opts = &opts.for_run(&run.info);
    check_digest(&run.digest, &run.info, opts, |pos| {
        let quoted = file
            .as_mut()
            .and_then(|f| crate::history::read::quote(f, *run.offsets.get(pos as usize)?));
        quoted.unwrap_or_else(|| serde_json::json!({"position": pos}))
    })
}

/// `fle-chaos check`: checks a stored run and writes its results.json.
pub fn check_stored(run_dir: &RunDir, opts: &CheckOptions) -> Result<Results> {
    let (run, ()) = load_run::<()>(run_dir)?;
    let results = check_loaded(&run, opts);
    run_dir.save_results(&results)?;
    Ok(results)
}

/// `check_stored` of the run folder at `run_dir` (for a caller holding its path only: a
/// test's hand-made run).
pub fn check_run(run_dir: &Path, opts: &CheckOptions) -> Result<Results> {
    check_stored(&RunDir::open(run_dir)?, opts)
}

/// Writes `results` as the results.json of the run folder `run_dir` (for a caller holding
/// the folder's path only: a test's hand-made run).
pub fn write_results(run_dir: &Path, results: &Results) -> Result<()> {
    RunDir::open(run_dir)?.save_results(results)
}
