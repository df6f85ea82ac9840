//! The run's single history writer, shared by observers, clients and the nemesis.
//!
//! Timestamps are taken under the same lock that assigns indices, so index order is time
//! order. Every line is flushed as it is written (a killed controller leaves a readable
//! history). It also keeps the tallies the progress line shows: operations by outcome and the
//! faults currently active (derived from nemesis events, so the nemesis needs no extra calls).

use crate::history::store::HistoryWriter;
use crate::history::{Event, EventType, F, NEMESIS};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

pub struct Recorder {
    start: Instant,
    writer: Mutex<HistoryWriter>,
    write_errors: AtomicU64,
    pub ok: AtomicU64,
    pub fail: AtomicU64,
    pub info: AtomicU64,
    active_faults: Mutex<BTreeSet<String>>,
}

impl Recorder {
    pub fn create(path: &Path, start: Instant) -> anyhow::Result<Self> {
        Ok(Recorder {
            start,
            writer: Mutex::new(HistoryWriter::create(path)?),
            write_errors: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            fail: AtomicU64::new(0),
            info: AtomicU64::new(0),
            active_faults: Mutex::new(BTreeSet::new()),
        })
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
            let mut writer = self.writer.lock().unwrap();
            event.time = self.now();
            match writer.append(event.clone()) {
                Ok(i) => event.index = i,
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
        if e.process == NEMESIS && e.kind == EventType::Info {
            let nodes: Vec<String> = e.value["nodes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let mut active = self.active_faults.lock().unwrap();
            let reset = e.value["mode"].as_str() == Some("reset");
            let (fault, undo) = match e.f {
                F::Kill => ("kill", false),
                F::Pause => ("pause", false),
                F::Partition => ("partition", false),
                F::Clock if !reset => ("clock", false),
                F::Start => ("kill", true),
                F::Resume => ("pause", true),
                F::Heal => ("partition", true),
                F::Clock => ("clock", true),
                _ => return,
            };
            if undo {
                if nodes.is_empty() {
                    active.retain(|a| !a.starts_with(fault));
                }
                for n in nodes {
                    active.remove(&format!("{fault} {n}"));
                }
                if fault == "partition" {
                    active.remove("partition");
                }
            } else if nodes.is_empty() || fault == "partition" {
                active.insert(fault.to_string());
            } else {
                for n in nodes {
                    active.insert(format!("{fault} {n}"));
                }
            }
        }
    }

    /// The faults in force now ("kill n2", "partition", ...).
    pub fn active_faults(&self) -> Vec<String> {
        self.active_faults.lock().unwrap().iter().cloned().collect()
    }

    /// How many events could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }
}
