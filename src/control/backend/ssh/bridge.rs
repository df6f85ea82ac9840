//! The `Control` trait is synchronous and is called from anywhere (async tasks of the run's
//! runtime, blocking threads, `Drop`), while `openssh` is async. The SSH cluster therefore owns
//! a small runtime of its own: callers hand it a future and wait on a channel, which is legal
//! on any thread (unlike `block_on` inside another runtime) and cannot deadlock the caller's
//! runtime, since the SSH work never needs the caller's workers.

use anyhow::{Context, Result};
use std::future::Future;
use tokio::runtime::Runtime;

pub struct Bridge {
    runtime: Option<Runtime>,
}

impl Bridge {
    pub fn new() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("flc-ssh")
            .enable_all()
            .build()
            .context("cannot start the SSH runtime")?;
        Ok(Bridge {
            runtime: Some(runtime),
        })
    }

    /// Runs `fut` on the SSH runtime and waits for its result.
    pub fn run<F, T>(&self, fut: F) -> T
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the bridge")
            .spawn(async move {
                let _ = tx.send(fut.await);
            });
        rx.recv()
            .expect("the SSH runtime dropped a task: it panicked (see the log)")
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // `shutdown_background` does not block, so dropping the cluster inside an async task
        // (where dropping a runtime would panic) is fine.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Runs `fut` to completion on a fresh thread with its own runtime: for one-off remote work
/// (`clean`) from code that may itself be inside a runtime.
pub fn run_detached<F, T>(fut: F) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("cannot start a runtime for SSH work")
            .block_on(fut)
    })
    .join()
    .expect("the SSH worker thread panicked")
}
