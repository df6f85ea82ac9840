//! The shrink's progress while it replays (minutes of child runs): a live line on a terminal
//! (candidates tried, the smallest fault sequence that failed so far, replays in flight, how
//! many finished replays reproduced the failure, time left of the budget); one plain line per
//! finished replay otherwise (CI logs, systemd's journal), as `sweep` does.

use super::search::Replay;
use crate::duration::span;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<ProgressBar>,
    /// Where the whole shrink must end (its `--budget`).
    deadline: Instant,
}

impl Progress {
    pub fn new(deadline: Instant) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            pb.set_style(
                ProgressStyle::with_template("{spinner} shrink {msg}")
                    .unwrap_or(ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        });
        Progress { bar, deadline }
    }

    /// The line for `runs` finished, `candidates` tried and `in_flight` replays running.
    pub fn line(&self, runs: &[Replay], candidates: usize, in_flight: usize) -> String {
        let done: Vec<&Replay> = runs.iter().filter(|r| !r.cancelled).collect();
        let reproduced = done.iter().filter(|r| r.reproduced).count();
        let smallest = runs
            .iter()
            .filter(|r| r.reproduced)
            .map(|r| r.faults)
            .min()
            .map_or("none yet".to_string(), |n| format!("{n} fault(s)"));
        let left = self.deadline.saturating_duration_since(Instant::now());
        format!(
            "{candidates} candidate(s) tried, smallest failing: {smallest}, {in_flight} replay(s) \
             running, {reproduced}/{} reproduced, about {} left",
            done.len(),
            span(left.as_secs_f64())
        )
    }

    /// A replay started or finished; `finished` is the one that just ended, if one did.
    pub fn update(&self, runs: &[Replay], candidates: usize, in_flight: usize, finished: bool) {
        let line = self.line(runs, candidates, in_flight);
        match &self.bar {
            Some(pb) => pb.set_message(line),
            None if finished => eprintln!("fle-chaos shrink: {line}"),
            None => {}
        }
    }

    pub fn finish(&self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(faults: usize, reproduced: bool, cancelled: bool) -> Replay {
        Replay {
            candidate: 1,
            faults,
            time_limit_s: 10.0,
            code: if reproduced { 1 } else { 0 },
            reproduced,
            invalid: vec![],
            run_dir: None,
            took_s: 1.0,
            cancelled,
        }
    }

    #[test]
    fn the_line_says_size_flight_reproduction_and_time_left() {
        let p = Progress {
            bar: None,
            deadline: Instant::now() + Duration::from_secs(600),
        };
        let runs = [
            replay(12, true, false),
            replay(5, true, false),
            replay(3, false, false),
            replay(2, false, true),
        ];
        let line = p.line(&runs, 7, 2);
        assert!(
            line.starts_with("7 candidate(s) tried, smallest failing: 5 fault(s)"),
            "{line}"
        );
        assert!(
            line.contains("2 replay(s) running, 2/3 reproduced"),
            "{line}"
        );
        assert!(line.contains("about 10 min"), "{line}");
        assert!(p.line(&[], 0, 0).contains("smallest failing: none yet"));
    }
}
