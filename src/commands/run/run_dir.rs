//! The controller's own log in the run folder (`RunDir::controller_log`, where `tracing` output
//! of the run goes); the folder itself is made by `store::RunDir::create`.

use crate::store::RunDir;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

static LOG: Mutex<Option<File>> = Mutex::new(None);

/// Where `tracing` writes: the current run's controller.log (nothing between runs).
#[derive(Clone, Copy)]
pub struct ControllerLog;

impl Write for ControllerLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG.lock().unwrap().as_mut() {
            Some(f) => f.write(buf),
            None => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match LOG.lock().unwrap().as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ControllerLog {
    type Writer = ControllerLog;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

/// Installs the subscriber once per process (later calls do nothing).
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(ControllerLog),
        )
        .with(fle_node::log_filter::from_env("FLE_CHAOS_LOG"))
        .try_init();
}

/// Sends the log to the run's controller.log from now on.
pub fn log_to(run_dir: &RunDir) -> Result<()> {
    let path = run_dir.controller_log();
    let mut f = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    // What apt printed while this machine was set up for the run (`control::backend::apt`).
    let setup = crate::control::backend::apt::take_transcript();
    if !setup.is_empty() {
        f.write_all(&setup)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    *LOG.lock().unwrap() = Some(f);
    Ok(())
}

/// Stops logging to the current run's file.
pub fn log_off() {
    *LOG.lock().unwrap() = None;
}
