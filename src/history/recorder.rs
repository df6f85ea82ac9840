//! The run's single history writer, shared by observers, clients and the nemesis.
//!
//! Timestamps are taken under the same lock that assigns indices, so index order is time
//! order. Lines reach the disk within about a second (`store`: a killed controller leaves a
//! readable history); `flush` writes out the rest at the end of a run. Each line written is
//! decoded back with the one decoder (`history::line`) and fed to a live
//! `history::view::View`: the controller's recovery wait, the progress line's active faults
//! and the checkers all derive their facts from the same lines by the same code.
//! A history that cannot be written (a full disk) is reported through `failed`, which the run
//! waits on beside its body: the run stops at once instead of testing on without a record.

use crate::history::situation::{Situation, Situations};
use crate::history::store::HistoryWriter;
use crate::history::view::View;
use crate::history::{Event, EventType, F};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tokio::sync::watch;

pub struct Recorder {
    start: Instant,
    /// The writer and the view fed from it (and the situations met, fed just before the
    /// view), under one lock: the view sees lines in index order.
    inner: Mutex<(HistoryWriter, View, Situations)>,
    write_errors: AtomicU64,
    pub ok: AtomicU64,
    pub fail: AtomicU64,
    pub info: AtomicU64,
    /// The first write error, with the file's path: set once.
    failure: watch::Sender<Option<String>>,
    path: std::path::PathBuf,
}

impl Recorder {
    /// A recorder for a cluster of `nodes` (the view's quorum is a majority of them that are
    /// not `observers`).
    pub fn create_for(
        path: &Path,
        start: Instant,
        nodes: &[String],
        observers: &[String],
    ) -> anyhow::Result<Self> {
        Ok(Recorder {
            start,
            inner: Mutex::new((
                HistoryWriter::create(path)?,
                View::of_ensemble(nodes, observers),
                Situations::new(),
            )),
            write_errors: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            info: AtomicU64::new(0),
            failure: watch::channel(None).0,
            path: path.to_path_buf(),
        })
    }

    /// A recorder whose view learns the nodes from the lines (tests that ask no quorum).
    pub fn create(path: &Path, start: Instant) -> anyhow::Result<Self> {
        Self::create_for(path, start, &[], &[])
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
            let (writer, view, situations) = &mut *inner;
            event.time = self.now();
            match writer.append_line(event.clone()) {
                Ok((i, text)) => {
                    event.index = i;
                    match crate::history::line::decode(text) {
                        Ok(line) => {
                            let e = view.of_line(i as u32, &line);
                            situations.line(view, &e, &line);
                            view.feed(e)
                        }
                        Err(e) => {
                            tracing::error!("the history line just written does not decode: {e}")
                        }
                    }
                }
                Err(e) => self.write_failed(e),
            }
        }
        self.tally(&event);
        event
    }

    /// Writes out the lines not yet on disk (the compressed history's open frame): at the
    /// end of a run, before anything reads the history.
    pub fn flush(&self) {
        let r = self.inner.lock().unwrap().0.flush();
        if let Err(e) = r {
            self.write_failed(e)
        }
    }

    /// Writes out the open frame if it is a second old; the run calls this every fraction of
    /// a second, so a quiet moment (no reads during a restart) loses no more than a second.
    pub fn flush_if_due(&self) {
        let r = self.inner.lock().unwrap().0.flush_if_due();
        if let Err(e) = r {
            self.write_failed(e)
        }
    }

    fn write_failed(&self, e: anyhow::Error) {
        // Say it once; the run, waiting on `failed`, stops and tears down.
        if self.write_errors.fetch_add(1, Ordering::Relaxed) == 0 {
            let why = format!("cannot write the history {}: {e:#}", self.path.display());
            tracing::error!("{why}");
            self.failure.send_replace(Some(why));
        }
    }

    fn tally(&self, e: &Event) {
        if e.f.is_client_op() {
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

    /// The situations the run's faults have met so far (`history::situation`).
    pub fn situations_met(&self) -> std::collections::BTreeSet<Situation> {
        self.inner.lock().unwrap().2.met()
    }

    /// How many fault starts the run has classified so far: a mark for [`Self::met_since`].
    pub fn situations_mark(&self) -> usize {
        self.inner.lock().unwrap().2.classified()
    }

    /// The situations of the fault starts recorded after `mark`, in order.
    pub fn met_since(&self, mark: usize) -> Vec<Situation> {
        self.inner.lock().unwrap().2.since(mark).to_vec()
    }

    /// The protocol's phase now, as a fault landing now would meet it.
    pub fn phase_now(&self) -> crate::history::situation::Phase {
        let now = self.now();
        let inner = self.inner.lock().unwrap();
        inner.2.phase_now(&inner.1, now)
    }

    /// The faults in force now ("kill n2", "partition", ...).
    pub fn active_faults(&self) -> Vec<String> {
        let mut out: Vec<String> = self.view(|v| {
            v.active_faults()
                .flat_map(|i| {
                    let kind = i.kind.name();
                    if i.nodes.is_empty() || i.kind.cuts_links() {
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

    /// Resolves with the reason when an event could not be written (at once if one already
    /// could not).
    pub async fn failed(&self) -> String {
        let mut rx = self.failure.subscribe();
        let why = match rx.wait_for(|f| f.is_some()).await {
            Ok(why) => why.clone(),
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            // The sender lives as long as `self`: unreachable, but never resolve falsely.
            None => std::future::pending().await,
        }
    }

    /// How many events could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }
}
