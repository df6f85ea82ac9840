//! Known findings: an invalid run whose every invalid verdict is the shape of a published bug
//! of the version it ran is reported as `known: ID` (report, summary, JUnit), so that a
//! nightly job against, say, ZooKeeper 3.8.0 is not red every night for ZOOKEEPER-2846 alone,
//! while any other invalid verdict still fails it.
//!
//! The signatures are written down once, in `known.toml` (built in). A signature matches on
//! typed facts only: the target, the versions the servers reported (test.json
//! `settings.software.versions`), and the kinds of violation each checker counted
//! (`kind::Kind`), never the words of an explanation. A checker that does not classify its
//! violations can only be covered by a signature's `follows` (a consequence, e.g. no
//! recovery when no server restarts). A run without reported versions matches nothing.
//!
//! A bug is fixed per release line: `fixed_in = ["3.8.5", "3.9.2"]` says 3.8.5 and later 3.8
//! releases are fixed, 3.9.2 and later 3.9 releases too, and every line after the newest
//! named. The shape of a known bug on a release where it is fixed is not known: the run stays
//! plainly invalid, and the bug it resembles is named (`resemblances`): a regression, or a
//! new bug of the same shape, for a person to triage.

use super::kind::Kind;
use super::{CheckResult, Validity};
use crate::history::test_info::TestInfo;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One published bug, as `known.toml` writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub id: String,
    pub title: String,
    pub target: String,
    #[serde(default)]
    pub since: Option<String>,
    /// The first fixed release of each line the fix reached (one string or a list).
    #[serde(default, deserialize_with = "one_or_many")]
    pub fixed_in: Vec<String>,
    pub docs: String,
    /// Checker name → kinds: the checker must be invalid with at least one of them.
    pub requires: BTreeMap<String, Vec<Kind>>,
    /// Checker name → kinds the bug may also cause.
    #[serde(default)]
    pub allows: BTreeMap<String, Vec<Kind>>,
    /// Checkers whose invalid verdict follows from the bug, whatever they counted.
    #[serde(default)]
    pub follows: Vec<String>,
}

/// `fixed_in = "3.9.3"` or `fixed_in = ["3.8.5", "3.9.2"]`.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(v) => vec![v],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    finding: Vec<Signature>,
}

/// A known finding a run showed, as results.json records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Known {
    pub id: String,
    pub title: String,
    /// Where the write-up is (a path in this repository, with its anchor).
    pub docs: String,
}

impl std::fmt::Display for Known {
    /// "ZOOKEEPER-2846: a DIFF from ... (docs/zookeeper.md#...)", as every output names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.id, self.title, self.docs)
    }
}

/// A known bug's shape seen on a release where that bug is fixed: not known (a regression,
/// or a new bug of the same shape), named so a person can triage it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resemblance {
    pub id: String,
    pub title: String,
    pub docs: String,
    /// The fixed releases the signature names.
    pub fixed_in: Vec<String>,
    /// The releases the run's servers reported.
    pub reported: Vec<String>,
}

impl std::fmt::Display for Resemblance {
    /// "ZOOKEEPER-4643 (fixed in 3.8.5, 3.9.2; the servers report 3.9.6): a regression, or a
    /// new bug of its shape: ... (docs/...)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (fixed in {}; the servers report {}): a regression, or a new bug of its shape: {} ({})",
            self.id,
            self.fixed_in.join(", "),
            self.reported.join(", "),
            self.title,
            self.docs
        )
    }
}

/// The built-in signatures.
pub fn builtin() -> Vec<Signature> {
    parse(include_str!("known.toml")).expect("the built-in known.toml is valid (tested)")
}

fn parse(text: &str) -> Result<Vec<Signature>, String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    Ok(file.finding)
}

/// The known findings that together cover every invalid verdict of `checkers`, or none when
/// the run is not invalid or any invalid verdict is left uncovered.
pub fn explain(checkers: &[CheckResult], info: &TestInfo, signatures: &[Signature]) -> Vec<Known> {
    let invalid: Vec<&CheckResult> = checkers
        .iter()
        .filter(|c| c.applicable && c.valid == Validity::False)
        .collect();
    if invalid.is_empty() {
        return Vec::new();
    }
    let versions = reported_versions(info);
    let matched: Vec<&Signature> = signatures
        .iter()
        .filter(|s| s.target == info.target && affects(s, &versions))
        .filter(|s| shows(s, &invalid))
        .collect();
    let covered = |c: &CheckResult| {
        let follows = matched.iter().any(|s| s.follows.contains(&c.name));
        let allowed: BTreeSet<Kind> = matched
            .iter()
            .flat_map(|s| [s.requires.get(&c.name), s.allows.get(&c.name)])
            .flatten()
            .flatten()
            .copied()
            .collect();
        follows || (!c.kinds.is_empty() && c.kinds.keys().all(|k| allowed.contains(k)))
    };
    if matched.is_empty() || !invalid.iter().all(|c| covered(c)) {
        return Vec::new();
    }
    matched
        .into_iter()
        .map(|s| Known {
            id: s.id.clone(),
            title: s.title.clone(),
            docs: s.docs.clone(),
        })
        .collect()
}

/// Whether the invalid checkers show the signature's required shape.
fn shows(s: &Signature, invalid: &[&CheckResult]) -> bool {
    s.requires.iter().all(|(name, kinds)| {
        invalid
            .iter()
            .any(|c| &c.name == name && kinds.iter().any(|k| c.kinds.contains_key(k)))
    })
}

/// The known bugs whose shape the run shows on a release where they are fixed (none when the
/// run is not invalid, or its servers reported no version).
pub fn resemblances(
    checkers: &[CheckResult],
    info: &TestInfo,
    signatures: &[Signature],
) -> Vec<Resemblance> {
    let invalid: Vec<&CheckResult> = checkers
        .iter()
        .filter(|c| c.applicable && c.valid == Validity::False)
        .collect();
    let versions = reported_versions(info);
    let fixed_here = |s: &Signature| {
        let since = s.since.as_deref().and_then(number);
        versions
            .iter()
            .any(|v| since.as_ref().is_none_or(|from| v >= from) && fixed(&s.fixed_in, v))
    };
    signatures
        .iter()
        .filter(|s| s.target == info.target && !invalid.is_empty())
        .filter(|s| fixed_here(s) && shows(s, &invalid))
        .map(|s| Resemblance {
            id: s.id.clone(),
            title: s.title.clone(),
            docs: s.docs.clone(),
            fixed_in: s.fixed_in.clone(),
            reported: versions.iter().map(|v| dotted(v)).collect(),
        })
        .collect()
}

/// "3.9.6".
fn dotted(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
}

/// "ZOOKEEPER-2846, ZOOKEEPER-4643": how a verdict line names them.
pub fn ids(known: &[Known]) -> String {
    known
        .iter()
        .map(|k| k.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The distinct versions the servers reported, as numbers ("3.8.0-abc" → [3, 8, 0]).
fn reported_versions(info: &TestInfo) -> BTreeSet<Vec<u32>> {
    let Some(software) = &info.settings.software else {
        return BTreeSet::new();
    };
    software
        .versions
        .values()
        .filter_map(|v| number(v))
        .collect()
}

/// The leading dotted number of a version string, or None when it has none.
fn number(version: &str) -> Option<Vec<u32>> {
    let head: String = version
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let parts: Option<Vec<u32>> = head
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().ok())
        .collect();
    parts.filter(|p| !p.is_empty())
}

/// Every reported version is at least `since` and not fixed; with none reported, nothing is
/// affected.
fn affects(s: &Signature, versions: &BTreeSet<Vec<u32>>) -> bool {
    let since = s.since.as_deref().and_then(number);
    !versions.is_empty()
        && versions
            .iter()
            .all(|v| since.as_ref().is_none_or(|from| v >= from) && !fixed(&s.fixed_in, v))
}

/// Whether release `v` has the fix: the fixed release of its own line (major.minor) is at or
/// below it, or, where the fix names no release of its line, `v` is past every release named
/// (a later line carries the fix; an earlier one never got it).
fn fixed(fixed_in: &[String], v: &[u32]) -> bool {
    let fixes: Vec<Vec<u32>> = fixed_in.iter().filter_map(|f| number(f)).collect();
    let line = |x: &[u32]| x.iter().take(2).copied().collect::<Vec<u32>>();
    match fixes.iter().find(|f| line(f) == line(v)) {
        Some(f) => v >= f.as_slice(),
        None => fixes.iter().all(|f| v > f.as_slice()) && !fixes.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::kind::Kinds;
    use crate::checker::Measurements;

    #[test]
    fn the_built_in_signatures_parse_and_name_real_checkers_and_docs() {
        let all = builtin();
        assert!(all.len() >= 4);
        let names: BTreeSet<&str> = crate::checker::names().collect();
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/zookeeper.md"))
                .unwrap();
        for s in &all {
            assert!(!s.requires.is_empty(), "{}: requires nothing", s.id);
            for c in s.requires.keys().chain(s.allows.keys()).chain(&s.follows) {
                assert!(names.contains(c.as_str()), "{}: no checker {c}", s.id);
            }
            let anchor = s.docs.split('#').nth(1).expect("an anchor");
            let heading = docs
                .lines()
                .filter(|l| l.starts_with('#'))
                .any(|l| anchor_of(l) == anchor);
            assert!(
                heading,
                "{}: no heading for #{anchor} in docs/zookeeper.md",
                s.id
            );
        }
        assert!(parse("[[finding]]\nid = 1").is_err());
    }

    /// GitHub's anchor of a markdown heading.
    fn anchor_of(heading: &str) -> String {
        heading
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    fn info(version: Option<&str>) -> TestInfo {
        let mut info: TestInfo = serde_json::from_value(serde_json::json!({
            "name": "k", "target": "zookeeper", "nodes": ["n1", "n2", "n3"], "workload": "writes",
            "nemesis": [], "seed": 1, "time_limit_s": 1.0, "tick_ms": 100, "init_limit": 5,
            "sync_limit": 2, "started_at": "2026-12-04T00:00:00Z", "replay_command": "x",
            "version": "0"
        }))
        .unwrap();
        if let Some(v) = version {
            let versions = ["n1", "n2", "n3"].map(|n| (n.to_string(), v.to_string()));
            info.settings.software = Some(crate::history::test_info::Software {
                versions: versions.into_iter().collect(),
                rest: Default::default(),
            });
        }
        info
    }

    fn checker(name: &str, valid: Validity, kinds: &[(Kind, usize)]) -> CheckResult {
        CheckResult {
            name: name.into(),
            valid,
            explanation: String::new(),
            evidence: vec![],
            measurements: Measurements::None,
            applicable: true,
            kinds: kinds.iter().copied().collect::<Kinds>(),
        }
    }

    fn ids_of(checkers: &[CheckResult], info: &TestInfo) -> String {
        ids(&explain(checkers, info, &builtin()))
    }

    #[test]
    fn a_stale_tail_on_3_8_0_is_zookeeper_2846_and_nothing_else_is_hidden() {
        let stale = checker("durability", Validity::False, &[(Kind::StaleTail, 1)]);
        let ok = checker("recovery", Validity::True, &[]);
        let v380 = info(Some("3.8.0-${mvngit.commit.id}"));
        assert_eq!(
            ids_of(&[stale.clone(), ok.clone()], &v380),
            "ZOOKEEPER-2846"
        );
        // A lost write beside it is not the bug's shape: the run is plainly invalid.
        let both = checker(
            "durability",
            Validity::False,
            &[(Kind::StaleTail, 1), (Kind::Lost, 2)],
        );
        assert_eq!(ids_of(&[both], &v380), "");
        // Another invalid checker left uncovered: plainly invalid.
        let stepdown = checker("leader-stepdown", Validity::False, &[]);
        assert_eq!(ids_of(&[stale.clone(), stepdown], &v380), "");
        // No versions reported, another target, or an older version than seen: not known.
        assert_eq!(ids_of(std::slice::from_ref(&stale), &info(None)), "");
        let mut fle = v380.clone();
        fle.target = "fle".into();
        assert_eq!(ids_of(std::slice::from_ref(&stale), &fle), "");
        assert_eq!(ids_of(&[stale], &info(Some("3.7.2"))), "");
    }

    #[test]
    fn a_fix_holds_on_its_own_line_and_every_later_one() {
        let per_line = ["3.8.5".to_string(), "3.9.2".to_string()];
        for (v, want) in [
            ("3.8.0", false),
            ("3.8.4", false),
            ("3.8.5", true),
            ("3.8.6", true),
            ("3.9.0", false),
            ("3.9.2", true),
            ("3.9.6", true),
            ("3.10.0", true),
            ("3.7.2", false),
        ] {
            assert_eq!(fixed(&per_line, &number(v).unwrap()), want, "{v}");
        }
        // A fix only on 3.9: the 3.8 line never got it.
        let only_39 = ["3.9.3".to_string()];
        assert!(!fixed(&only_39, &number("3.8.6").unwrap()));
        assert!(fixed(&only_39, &number("3.9.3").unwrap()));
        assert!(!fixed(&[], &number("3.9.6").unwrap()), "unfixed");
    }

    #[test]
    fn a_known_shape_on_a_fixed_release_is_not_known_but_named_as_resembling() {
        let lacks = checker(
            "leader-completeness",
            Validity::False,
            &[(Kind::LeaderLacksWrite, 1)],
        );
        let all = builtin();
        for (v, known, resembles) in [
            ("3.8.0", "ZOOKEEPER-4643", ""),
            ("3.9.1", "ZOOKEEPER-4643", ""),
            ("3.9.6", "", "ZOOKEEPER-4643"),
            ("3.8.6", "", "ZOOKEEPER-4643"),
        ] {
            let run = [lacks.clone()];
            let info = info(Some(v));
            assert_eq!(ids(&explain(&run, &info, &all)), known, "{v}");
            let r = resemblances(&run, &info, &all);
            let named: Vec<&str> = r.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(named.join(", "), resembles, "{v}");
            if let Some(r) = r.first() {
                let line = r.to_string();
                assert!(
                    line.starts_with("ZOOKEEPER-4643 (fixed in 3.8.5, 3.9.2; the servers report")
                        && line.contains("a regression"),
                    "{line}"
                );
            }
        }
        // Valid runs resemble nothing.
        let ok = checker("leader-completeness", Validity::True, &[]);
        assert!(resemblances(&[ok], &info(Some("3.9.6")), &all).is_empty());
    }

    #[test]
    fn fixed_versions_and_unclassified_checkers_are_never_known() {
        let hole = checker("durability", Validity::False, &[(Kind::Hole, 1)]);
        assert_eq!(
            ids_of(std::slice::from_ref(&hole), &info(Some("3.8.4"))),
            "ZOOKEEPER-4712"
        );
        // 4712 is fixed in 3.9.3, which alone carries 4925's hole; 3.9.4 fixed that too.
        assert_eq!(
            ids_of(std::slice::from_ref(&hole), &info(Some("3.9.3"))),
            "ZOOKEEPER-4925"
        );
        assert_eq!(ids_of(&[hole], &info(Some("3.9.4"))), "", "fixed in 3.9.4");
        let lacks = checker(
            "leader-completeness",
            Validity::False,
            &[(Kind::LeaderLacksWrite, 1)],
        );
        let lost = checker("durability", Validity::False, &[(Kind::Lost, 3)]);
        assert_eq!(
            ids_of(&[lacks.clone(), lost.clone()], &info(Some("3.8.0"))),
            "ZOOKEEPER-4643"
        );
        // Lost writes alone are not 4643's mark: its requirement is the leader's.
        assert_eq!(ids_of(&[lost], &info(Some("3.8.0"))), "");
        let crash = checker("crash", Validity::False, &[(Kind::NoSnapshotAtRestart, 2)]);
        let recovery = checker("recovery", Validity::False, &[]);
        assert_eq!(
            ids_of(&[crash, recovery.clone()], &info(Some("3.8.0"))),
            "zookeeper-unsynced-start-up-snapshot"
        );
        let other_crash = checker(
            "crash",
            Validity::False,
            &[(Kind::NoSnapshotAtRestart, 1), (Kind::Exit, 1)],
        );
        assert_eq!(ids_of(&[other_crash, recovery], &info(Some("3.8.0"))), "");
        // Two bugs in one run: both named.
        let stale = checker("durability", Validity::False, &[(Kind::StaleTail, 1)]);
        assert_eq!(
            ids_of(&[stale, lacks], &info(Some("3.8.0"))),
            "ZOOKEEPER-2846, ZOOKEEPER-4643"
        );
    }
}
