//! Teardown on every exit path. The guard owns the run's registry (and the cluster, once it
//! exists); `teardown_now` is the normal path, and `Drop` covers errors and panics that unwind
//! past it. Only a SIGKILLed controller escapes it, and `fle-chaos clean` handles that.

use crate::control::backend::registry::Registry;
use crate::control::backend::teardown::{remove_all, TeardownReport};
use crate::control::Control;
use std::sync::{Arc, Mutex};

pub struct Guard {
    registry: Arc<Registry>,
    control: Mutex<Option<Arc<dyn Control>>>,
    armed: Mutex<bool>,
}

impl Guard {
    pub fn new(registry: Arc<Registry>) -> Self {
        Guard {
            registry,
            control: Mutex::new(None),
            armed: Mutex::new(true),
        }
    }

    /// The cluster exists: tear it down through its `Control` (which also reaps its children).
    pub fn set_control(&self, control: Arc<dyn Control>) {
        *self.control.lock().unwrap() = Some(control);
    }

    /// `--leave-running`: keep everything; the registry stays for `clean`.
    pub fn disarm(&self) {
        *self.armed.lock().unwrap() = false;
    }

    /// Removes everything the run created (once; later calls do nothing).
    pub fn teardown_now(&self) {
        {
            let mut armed = self.armed.lock().unwrap();
            if !*armed {
                return;
            }
            *armed = false;
        }
        let control = self.control.lock().unwrap().clone();
        let report = match control {
            Some(c) => c.teardown(),
            None => {
                let r = remove_all(&self.registry.resources());
                if r.errors.is_empty() {
                    self.registry.release();
                }
                r
            }
        };
        log_report(&report);
    }
}

fn log_report(report: &TeardownReport) {
    for line in &report.removed {
        tracing::info!("teardown: removed {line}");
    }
    for line in &report.errors {
        tracing::error!("teardown: {line}");
        eprintln!("fle-chaos: teardown: {line} (run `fle-chaos clean`)");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.teardown_now();
    }
}
