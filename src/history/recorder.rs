//! The run's single history writer, shared by observers, clients and the nemesis.
//!
//! Timestamps are taken under the same lock that assigns indices, so index order is time
//! order. Every line is flushed as it is written (a killed controller leaves a readable
//! history). Each line written is decoded back with the one decoder (`history::line`) and fed
//! to a live `history::view::View`: the controller's recovery wait, the progress line's active
//! faults and the checkers all derive their facts from the same lines by the same code.

use crate::history::store::HistoryWriter;
use crate::history::view::View;
use crate::history::{Event, EventType, F};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

pub struct Recorder {
    start: Instant,
    /// The writer and the view fed from it, under one lock: the view sees lines in index order.
    inner: Mutex<(HistoryWriter, View)>,
    write_errors: AtomicU64,
    pub ok: AtomicU64,
    pub fail: AtomicU64,
    pub info: AtomicU64,
}

impl Recorder {
    /// A recorder for a cluster of `nodes` (the view's quorum is a majority of them).
    pub fn create_for(path: &Path, start: Instant, nodes: &[String]) -> anyhow::Result<Self> {
        Ok(Recorder {
            start,
            inner: Mutex::new((HistoryWriter::create(path)?, View::new(nodes))),
            write_errors: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            info: AtomicU64::new(0),
        })
    }

    /// A recorder whose view learns the nodes from the lines (tests that ask no quorum).
    pub fn create(path: &Path, start: Instant) -> anyhow::Result<Self> {
        Self::create_for(path, start, &[])
    }

    /// Nanoseconds since the run started (the controller's monotonic clock).
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Appends one event, stamped now; returns it as written.
    pub fn record(
        &self,
        process: &str,
        kind: EventType,
        f: F,
        node: Option<&str>,
        value: serde_json::Value,
    ) -> Event {
        let mut event = Event {
            index: 0,
            time: 0,
            process: process.to_string(),
            kind,
            f,
            node: node.map(str::to_string),
            value,
        };
        {
            let mut inner = self.inner.lock().unwrap();
            let (writer, view) = &mut *inner;
            event.time = self.now();
            match writer.append_line(event.clone()) {
                Ok((i, text)) => {
                    event.index = i;
                    match crate::history::line::decode(text) {
                        Ok(line) => view.feed(i as u32, &line),
                        Err(e) => {
                            tracing::error!("the history line just written does not decode: {e}")
                        }
                    }
                }
                Err(e) => {
                    // A full disk must not stop the run's teardown; count it and say it once.
                    if self.write_errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::error!("cannot write the history: {e:#}");
                    }
                }
            }
        }
        self.tally(&event);
        event
    }

    fn tally(&self, e: &Event) {
        if matches!(e.f, F::Write | F::Read) {
            match e.kind {
                EventType::Ok => self.ok.fetch_add(1, Ordering::Relaxed),
                EventType::Fail => self.fail.fetch_add(1, Ordering::Relaxed),
                EventType::Info => self.info.fetch_add(1, Ordering::Relaxed),
                EventType::Invoke => 0,
            };
        }
    }

    /// Asks the live view of everything recorded so far.
    pub fn view<R>(&self, ask: impl FnOnce(&View) -> R) -> R {
        ask(&self.inner.lock().unwrap().1)
    }

    /// The faults in force now ("kill n2", "partition", ...).
    pub fn active_faults(&self) -> Vec<String> {
        let mut out: Vec<String> = self.view(|v| {
            v.active_faults()
                .flat_map(|i| {
                    let kind = i.kind.name();
                    if i.nodes.is_empty() || i.kind == crate::history::FaultKind::Partition {
                        vec![kind.to_string()]
                    } else {
                        i.nodes.iter().map(|n| format!("{kind} {n}")).collect()
                    }
                })
                .collect()
        });
        out.sort();
        out.dedup();
        out
    }

    /// How many events could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }
}
