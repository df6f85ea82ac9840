//! Interruptions: SIGINT, SIGTERM and SIGHUP end the test cleanly (teardown, an `interrupted`
//! event in the history, exit 130/143/129). The handlers are installed once, when `test`
//! starts, and stay for the whole command: a signal that arrives between runs, or while a run
//! is being checked, is still seen (tokio never uninstalls a handler, so one installed late
//! would swallow earlier signals instead of letting them kill the process).

use crate::exit;
use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The signals that interrupt a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Hup,
}

impl Signal {
    /// The name recorded in the history's `interrupted` event.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
        }
    }

    /// 128 + the signal's number, as shells report a process the signal killed.
    pub fn exit_code(self) -> i32 {
        match self {
            Signal::Int => exit::SIGINT,
            Signal::Term => exit::SIGTERM,
            Signal::Hup => exit::SIGHUP,
        }
    }
}

/// The first interrupting signal received, shared by every run of the command.
#[derive(Clone)]
pub struct Interrupts {
    rx: watch::Receiver<Option<Signal>>,
}

impl Interrupts {
    /// Installs the handlers (inside the tokio runtime) and starts listening.
    pub fn install() -> Result<Interrupts> {
        let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut hup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            loop {
                let sig = tokio::select! {
                    _ = int.recv() => Signal::Int,
                    _ = term.recv() => Signal::Term,
                    _ = hup.recv() => Signal::Hup,
                };
                // The first signal decides the exit code; later ones change nothing.
                tx.send_if_modified(|s| s.is_none() && s.replace(sig).is_none());
            }
        });
        Ok(Interrupts { rx })
    }

    /// The signal received so far, if any.
    pub fn received(&self) -> Option<Signal> {
        *self.rx.borrow()
    }

    /// Resolves when a signal has been received (at once if one already was).
    pub async fn wait(&self) -> Signal {
        let mut rx = self.rx.clone();
        let received = rx.wait_for(|s| s.is_some()).await.ok().and_then(|s| *s);
        match received {
            Some(s) => s,
            // The listener never ends while the runtime runs; if it did, never resolve.
            None => std::future::pending().await,
        }
    }
}
