//! The sweep's progress display: runs done/failed/running and the time left. A live line on a
//! terminal; one plain line per finished run otherwise (CI logs, systemd's journal), so a log
//! shows every run's result without control characters.

use super::record::{outcome_word, RunRecord};
use crate::duration::span;
use crate::exit;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub struct Progress {
    total: usize,
    done: usize,
    failed: usize,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let pb =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            pb.set_style(
                ProgressStyle::with_template("{spinner} sweep [{bar:30}] {pos}/{len} {msg}")
                    .unwrap_or(ProgressStyle::default_bar()),
            );
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        });
        Progress {
            total,
            done: 0,
            failed: 0,
            bar,
        }
    }

    fn status(&self, running: usize, left: Option<Duration>) -> String {
        let left = match left {
            // Nothing left to estimate once the last run is done ("about 0.00 s left" said so).
            Some(d) if !d.is_zero() => format!(", about {} left", span(d.as_secs_f64())),
            _ => String::new(),
        };
        format!(
            "{}/{} done, {} failed, {running} running{left}",
            self.done, self.total, self.failed
        )
    }

    /// A run started (`running` now in flight).
    pub fn started(&self, id: &str, running: usize, left: Option<Duration>) {
        match &self.bar {
            Some(pb) => pb.set_message(format!("{} | started {id}", self.status(running, left))),
            None => eprintln!("fle-chaos sweep: started {id}"),
        }
    }

    /// A run finished.
    pub fn finished(&mut self, r: &RunRecord, running: usize, left: Option<Duration>) {
        self.done += 1;
        if r.outcome != exit::VALID {
            self.failed += 1;
        }
        let line = format!(
            "{}: {} (exit {}) in {} | {}",
            r.cell.id,
            outcome_word(r),
            r.code,
            span(r.duration_s),
            self.status(running, left)
        );
        match &self.bar {
            Some(pb) => {
                pb.set_position(self.done as u64);
                pb.println(format!("fle-chaos sweep: {line}"));
            }
            None => eprintln!("fle-chaos sweep: {line}"),
        }
    }

    /// Says something above the live line (or as a line).
    pub fn say(&self, text: &str) {
        match &self.bar {
            Some(pb) => pb.println(format!("fle-chaos sweep: {text}")),
            None => eprintln!("fle-chaos sweep: {text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
    }
}
