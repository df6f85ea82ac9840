//! The simulate folder's one summary: `summary.json` (typed: the counts, the speed, each run's
//! verdict and failed checkers, and for a failing run whether its real replay reproduced it),
//! `summary.html` (the same for people: a banner with the worst verdict, the failures per
//! checker, and each run that is not valid with its report, schedule and replay command) and
//! `junit.xml` (one testcase per run that is not valid, one for all the valid runs together,
//! so that 100,000 runs stay a small file).

use super::explore::{Exploration, ExploredRun};
use crate::checker::Validity;
use crate::duration::span;
use crate::report::html::CSS;
use crate::report::text::escape;
use crate::store::{self, JUNIT};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub const JSON: &str = "summary.json";
pub const HTML: &str = "summary.html";

/// One run's line in the summary.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunSummary {
    pub seed: u64,
    pub valid: Validity,
    /// The checkers behind its verdict (`SimRun::failed`).
    pub failed: Vec<String>,
    /// The run's folder, kept when it was not valid.
    pub folder: Option<PathBuf>,
    /// Its schedule replayed on real processes (`--confirm`, `--confirm-replays` times), in
    /// order; empty when it was not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replays: Vec<Replay>,
    /// An explored run (`--explore`): its place and how its input was made; None without
    /// `--explore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explored: Option<ExploredRun>,
}

/// What a real run of a simulated failure's schedule said.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Replay {
    pub valid: Validity,
    /// The checkers the real run found not valid.
    pub failed: Vec<String>,
    /// The real run's folder.
    pub folder: Option<PathBuf>,
    /// The real run was not valid for a checker the simulated run failed.
    pub reproduced: bool,
    /// Why there is no verdict (the real run could not start, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Replay {
    /// A replay that gave no verdict, and why.
    pub fn error(why: String) -> Replay {
        Replay {
            valid: Validity::Unknown,
            failed: Vec::new(),
            folder: None,
            reproduced: false,
            error: Some(why),
        }
    }
}

/// Everything `fle-chaos simulate` reports about its runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SimSummary {
    pub command: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub runs: usize,
    pub valid: usize,
    pub invalid: usize,
    pub unknown: usize,
    pub seconds: f64,
    pub runs_per_minute: f64,
    /// Why it stopped before `--runs` (the budget, `--until-invalid`, a signal), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The exit code: the worst verdict.
    pub exit_code: i32,
    pub results: Vec<RunSummary>,
    /// What `--explore` learnt: its corpus, the coverage reached, the novelty curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exploration: Option<Exploration>,
}

impl SimSummary {
    pub fn new(
        command: String,
        started_at: chrono::DateTime<chrono::Utc>,
        seconds: f64,
        stopped: Option<String>,
        mut results: Vec<RunSummary>,
    ) -> SimSummary {
        results.sort_by_key(|r| r.seed);
        let count = |v| results.iter().filter(|r| r.valid == v).count();
        SimSummary {
            command,
            started_at,
            runs: results.len(),
            valid: count(Validity::True),
            invalid: count(Validity::False),
            unknown: count(Validity::Unknown),
            seconds,
            runs_per_minute: results.len() as f64 * 60.0 / seconds.max(1e-9),
            stopped,
            exit_code: results.iter().fold(crate::exit::VALID, |c, r| {
                crate::exit::worse(c, r.valid.exit_code())
            }),
            results,
            exploration: None,
        }
    }

    /// The runs that are not valid.
    pub fn failures(&self) -> impl Iterator<Item = &RunSummary> {
        self.results.iter().filter(|r| r.valid != Validity::True)
    }

    /// Of the real replays of failures (`--confirm`), how many reproduced and how many ran (a
    /// replay that could not run counts in neither); None without any.
    pub fn reproduction(&self) -> Option<(usize, usize)> {
        rate(self.failures().flat_map(|r| &r.replays))
    }

    /// "; real replays: 3 of 4 reproduced", or nothing when none ran.
    fn reproduction_text(&self) -> String {
        self.reproduction()
            .map(|(k, n)| format!("; real replays: {k} of {n} reproduced"))
            .unwrap_or_default()
    }

    /// "; explored: 12 inputs kept, 140 transitions, 610 cluster states, new per 1,000
    /// runs: 690, 40, 20", or nothing for fresh seeds.
    fn exploration_text(&self) -> String {
        let Some(e) = &self.exploration else {
            return String::new();
        };
        let curve: Vec<String> = e.novelty.iter().map(u64::to_string).collect();
        format!(
            "; explored: {} inputs kept, {} transitions, {} cluster states, new per {} runs: {}",
            e.corpus,
            e.transitions,
            e.cluster_states,
            super::explore::CURVE_RUNS,
            curve.join(", ")
        )
    }

    /// How many runs each checker failed, by name.
    pub fn by_checker(&self) -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        for name in self.failures().flat_map(|r| &r.failed) {
            *m.entry(name.as_str()).or_insert(0) += 1;
        }
        m
    }

    /// Writes summary.json, summary.html and junit.xml into `dir`; returns the JSON's path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let write = |name: &str, text: String| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        };
        let json = write(JSON, serde_json::to_string_pretty(self)?)?;
        write(HTML, self.html())?;
        write(JUNIT, self.junit())?;
        Ok(json)
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        format!(
            "{} runs in {:.1} s ({:.0} runs/min): {} valid, {} invalid, {} unknown{}{}{}",
            self.runs,
            self.seconds,
            self.runs_per_minute,
            self.valid,
            self.invalid,
            self.unknown,
            self.reproduction_text(),
            self.exploration_text(),
            self.stopped
                .as_deref()
                .map(|s| format!(" (stopped: {s})"))
                .unwrap_or_default()
        )
    }

    pub fn html(&self) -> String {
        let banner =
            crate::report::html::verdict_class(Some(Validity::of_exit_code(self.exit_code)));
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>simulate</title>\
             <style>{CSS}</style></head><body>\n<div class=\"banner {banner}\"><h1>simulate: exit {}</h1>\
             <div class=\"sub\">{} run(s): {} valid, {} invalid, {} unknown; {:.0} runs/min; \
             started {} UTC, took {}{}{}{}</div></div>\n<main>\n",
            self.exit_code,
            self.runs,
            self.valid,
            self.invalid,
            self.unknown,
            self.runs_per_minute,
            self.started_at.format("%Y-%m-%d %H:%M:%S"),
            span(self.seconds),
            self.reproduction_text(),
            escape(&self.exploration_text()),
            self.stopped
                .as_deref()
                .map(|s| format!("; stopped: {}", escape(s)))
                .unwrap_or_default()
        );
        let _ = writeln!(
            h,
            "<p><code>{}</code>. Simulated runs of fle-node's own code in virtual time: a \
             simulated verdict is evidence to confirm on real processes, never the verdict on \
             them. Replay a failure with its schedule and <code>fle-chaos test</code>.</p>",
            escape(&self.command)
        );
        let by_checker = self.by_checker();
        if !by_checker.is_empty() {
            h.push_str(
                "<h2>Failures by checker</h2>\n<table><tr><th>checker</th><th>runs</th></tr>\n",
            );
            for (name, n) in by_checker {
                let _ = writeln!(h, "<tr><td>{}</td><td>{n}</td></tr>", escape(name));
            }
            h.push_str("</table>\n");
        }
        h.push_str("<h2>Runs that are not valid</h2>\n");
        if self.failures().next().is_none() {
            h.push_str("<p>None.</p>\n");
        } else {
            h.push_str(
                "<table><tr><th>seed</th><th>verdict</th><th>checkers</th><th>report</th>\
                 <th>schedule</th><th>on real processes</th></tr>\n",
            );
            for r in self.failures() {
                let folder = |f: &Option<PathBuf>, file: &str, text: &str| match f {
                    Some(d) => format!(
                        "<a href=\"{}\">{text}</a>",
                        escape(&d.join(file).to_string_lossy())
                    ),
                    None => "-".to_string(),
                };
                let _ = writeln!(
                    h,
                    "<tr><td>{}{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    r.seed,
                    r.explored.as_ref().map(|e| format!(", {}", escape(&e.to_string()))).unwrap_or_default(),
                    crate::report::html::verdict_class(Some(r.valid)),
                    r.valid.word(),
                    escape(&r.failed.join(", ")),
                    folder(&r.folder, store::REPORT, "report"),
                    folder(&r.folder, store::SCHEDULE, store::SCHEDULE),
                    replays_text(&r.replays)
                );
            }
            h.push_str("</table>\n");
        }
        h.push_str("</main></body></html>\n");
        h
    }

    pub fn junit(&self) -> String {
        let failures = self.invalid;
        let errors = self.unknown;
        let tests = failures + errors + usize::from(self.valid > 0);
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            x,
            "<testsuites name=\"fle-chaos simulate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">"
        );
        let _ = writeln!(
            x,
            "  <testsuite name=\"simulate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" \
             skipped=\"0\" timestamp=\"{}\" time=\"{:.3}\">",
            self.started_at.format("%Y-%m-%dT%H:%M:%S"),
            self.seconds
        );
        let _ = writeln!(
            x,
            "    <properties><property name=\"command\" value=\"{}\"/></properties>",
            escape(&self.command)
        );
        if self.valid > 0 {
            let _ = writeln!(
                x,
                "    <testcase name=\"{} valid runs\" classname=\"fle-chaos.simulate\" time=\"0\"></testcase>",
                self.valid
            );
        }
        for r in self.failures() {
            let (tag, kind) = match r.valid {
                Validity::False => ("failure", "invalid"),
                _ => ("error", "unknown"),
            };
            let body = format!(
                "{}; {}",
                r.folder
                    .as_ref()
                    .map(|d| format!("run folder {}", d.display()))
                    .unwrap_or_else(|| "no run folder".to_string()),
                replays_text(&r.replays)
            );
            let _ = write!(
                x,
                "    <testcase name=\"seed {}\" classname=\"fle-chaos.simulate\" time=\"0\">\n      \
                 <{tag} message=\"{kind}: {}\" type=\"{kind}\">{}</{tag}>\n    </testcase>\n",
                r.seed,
                escape(&r.failed.join(", ")),
                escape(&body)
            );
        }
        x.push_str("  </testsuite>\n</testsuites>\n");
        x
    }
}

/// Of `replays`, how many reproduced and how many ran (with a verdict); None if none ran.
pub fn rate<'a>(replays: impl IntoIterator<Item = &'a Replay>) -> Option<(usize, usize)> {
    let ran: Vec<&Replay> = (replays.into_iter())
        .filter(|r| r.error.is_none())
        .collect();
    let reproduced = ran.iter().filter(|r| r.reproduced).count();
    (!ran.is_empty()).then_some((reproduced, ran.len()))
}

/// What a failure's real replays said: one replay's outcome, or for several the rate and each
/// one's ("reproduced in 2 of 3 replays: ...; ...").
pub fn replays_text(replays: &[Replay]) -> String {
    match replays {
        [] => "not replayed".to_string(),
        [one] => replay_text(one),
        several => {
            let (k, n) = rate(several).unwrap_or((0, 0));
            let each: Vec<String> = several.iter().map(replay_text).collect();
            format!("reproduced in {k} of {n} replays: {}", each.join("; "))
        }
    }
}

/// What one real replay said.
fn replay_text(r: &Replay) -> String {
    match r {
        Replay { error: Some(e), .. } => format!("not replayed: {e}"),
        r => format!(
            "{} ({}){}",
            if r.reproduced {
                "reproduced"
            } else {
                "not reproduced"
            },
            match r.failed.is_empty() {
                true => r.valid.word().to_string(),
                false => format!("{}: {}", r.valid.word(), r.failed.join(", ")),
            },
            r.folder
                .as_ref()
                .map(|d| format!(", {}", d.display()))
                .unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, valid: Validity, failed: &[&str]) -> RunSummary {
        RunSummary {
            seed,
            valid,
            failed: failed.iter().map(|s| s.to_string()).collect(),
            folder: None,
            replays: Vec::new(),
            explored: None,
        }
    }

    #[test]
    fn counts_worst_verdict_and_junit_hold_one_case_per_failure() {
        let s = SimSummary::new(
            "fle-chaos simulate".into(),
            chrono::Utc::now(),
            2.0,
            None,
            vec![
                run(3, Validity::Unknown, &["recovery"]),
                run(1, Validity::True, &[]),
                run(2, Validity::False, &["election-safety", "recovery"]),
                run(4, Validity::True, &[]),
            ],
        );
        assert_eq!((s.runs, s.valid, s.invalid, s.unknown), (4, 2, 1, 1));
        assert_eq!(s.exit_code, crate::exit::INVALID);
        assert_eq!(
            s.results.iter().map(|r| r.seed).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(s.by_checker().get("recovery"), Some(&2));
        let x = s.junit();
        assert!(x.contains("tests=\"3\" failures=\"1\" errors=\"1\""), "{x}");
        assert!(x.contains("<testcase name=\"2 valid runs\""), "{x}");
        assert!(x.contains("<testcase name=\"seed 2\""), "{x}");
        assert!(!x.contains("seed 1\""), "{x}");
        let h = s.html();
        assert!(h.contains("banner invalid"), "{h}");
        assert!(h.contains("<td>election-safety</td><td>1</td>"), "{h}");
    }

    fn replay(reproduced: bool) -> Replay {
        Replay {
            valid: if reproduced {
                Validity::False
            } else {
                Validity::True
            },
            failed: if reproduced {
                vec!["durability".into()]
            } else {
                Vec::new()
            },
            folder: None,
            reproduced,
            error: None,
        }
    }

    #[test]
    fn the_line_and_page_give_the_real_replays_reproduction_rate() {
        let replayed = |seed, replays: Vec<Replay>| RunSummary {
            replays,
            ..run(seed, Validity::False, &["durability"])
        };
        let mut results = vec![
            replayed(1, vec![replay(true)]),
            replayed(2, vec![replay(false)]),
            replayed(3, vec![replay(true)]),
        ];
        results.push(replayed(4, vec![Replay::error("no root".into())]));
        results.push(run(5, Validity::False, &["durability"]));
        let s = SimSummary::new("c".into(), chrono::Utc::now(), 1.0, None, results);
        assert_eq!(s.reproduction(), Some((2, 3)));
        assert!(
            s.line().contains("real replays: 2 of 3 reproduced"),
            "{}",
            s.line()
        );
        assert!(s.html().contains("real replays: 2 of 3 reproduced"));
        let none = SimSummary::new(
            "c".into(),
            chrono::Utc::now(),
            1.0,
            None,
            vec![run(1, Validity::False, &[])],
        );
        assert_eq!(none.reproduction(), None);
        assert!(!none.line().contains("replays"), "{}", none.line());
    }

    #[test]
    fn several_replays_of_one_failure_give_its_rate_and_each_outcome() {
        let three = vec![replay(true), replay(false), Replay::error("no root".into())];
        let text = replays_text(&three);
        assert!(text.starts_with("reproduced in 1 of 2 replays: "), "{text}");
        assert!(
            text.contains(
                "reproduced (invalid: durability); not reproduced (valid); not replayed: no root"
            ),
            "{text}"
        );
        assert_eq!(replays_text(&three[1..2]), "not reproduced (valid)");
        assert_eq!(replays_text(&[]), "not replayed");
        let s = SimSummary::new(
            "c".into(),
            chrono::Utc::now(),
            1.0,
            None,
            vec![RunSummary {
                replays: three,
                ..run(7, Validity::False, &["durability"])
            }],
        );
        assert_eq!(s.reproduction(), Some((1, 2)));
        // Read back as written.
        let again: SimSummary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again.results[0].replays.len(), 3);
    }

    #[test]
    fn an_all_valid_batch_is_exit_0_and_says_none_failed() {
        let s = SimSummary::new(
            "c".into(),
            chrono::Utc::now(),
            1.0,
            Some("the budget ran out".into()),
            vec![run(1, Validity::True, &[])],
        );
        assert_eq!(s.exit_code, crate::exit::VALID);
        assert!(s.html().contains("<p>None.</p>"));
        assert!(
            s.line().contains("(stopped: the budget ran out)"),
            "{}",
            s.line()
        );
    }
}
