//! The run folder (`reports/<test-name>/<timestamp>/`), the `reports/latest` link, and the
//! controller's own log (`controller.log`, where `tracing` output of the run goes).

use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Creates `out/name/<UTC timestamp>/` (unique even for runs started in the same millisecond)
/// and points `out/latest` at it.
pub fn create(out: &Path, name: &str) -> Result<PathBuf> {
    let base = out.join(name);
    std::fs::create_dir_all(&base).with_context(|| {
        format!(
            "cannot create {} (choose another --out folder)",
            base.display()
        )
    })?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let mut dir = base.join(&stamp);
    let mut n = 1;
    while std::fs::create_dir(&dir).is_err() {
        if n > 100 {
            anyhow::bail!("cannot create a run folder under {}", base.display());
        }
        dir = base.join(format!("{stamp}-{n}"));
        n += 1;
    }
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    point_latest(out, &dir)?;
    Ok(dir)
}

/// Replaces `out/latest` with a relative symlink to `run_dir`, atomically (rename over it).
fn point_latest(out: &Path, run_dir: &Path) -> Result<()> {
    let out = out.canonicalize()?;
    let relative = run_dir.strip_prefix(&out).unwrap_or(run_dir);
    let tmp = out.join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(relative, &tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    std::fs::rename(&tmp, out.join("latest"))
        .with_context(|| format!("cannot update {}/latest", out.display()))?;
    Ok(())
}

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
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLE_CHAOS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(ControllerLog)
        .try_init();
}

/// Sends the log to `run_dir/controller.log` from now on.
pub fn log_to(run_dir: &Path) -> Result<()> {
    let path = run_dir.join("controller.log");
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
