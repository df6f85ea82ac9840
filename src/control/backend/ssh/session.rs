//! One host's SSH connection: the system OpenSSH client through the `openssh` crate, one
//! multiplexed master per host (so every command after the first costs a round trip, not a
//! handshake), honouring ~/.ssh/config, known_hosts and the agent as plain `ssh` would.
//!
//! A command that fails because the connection is gone (the master died, the network dropped,
//! the host rebooted its sshd) is retried on a fresh connection, and every such loss is
//! recorded in `ConnectionLog`, which the run keeps in its folder. Remote commands run under
//! `sh -c` (whatever the login shell is) and, for a non-root user, under `sudo -n`.

use super::shell::quote;
use anyhow::{anyhow, Context, Result};
use openssh::{ControlPersist, KnownHosts, Session, SessionBuilder, Stdio};
use std::io::Write as _;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How to reach the hosts: the `--ssh-*` flags. `None` leaves the choice to ~/.ssh/config.
#[derive(Debug, Clone, Default)]
pub struct SshOptions {
    pub user: Option<String>,
    pub port: Option<u16>,
    pub private_key: Option<PathBuf>,
    /// false: accept any host key and remember none (throwaway VMs).
    pub strict_host_key_checking: bool,
    /// An ssh_config file to use instead of ~/.ssh/config (`ssh -F`).
    pub config_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// How many times a command is retried on a new connection after losing the old one.
    pub retries: u32,
}

impl SshOptions {
    /// `user@host:port` as far as the options say it (for messages).
    pub fn describe(&self, host: &str) -> String {
        let mut s = String::new();
        if let Some(u) = &self.user {
            s.push_str(u);
            s.push('@');
        }
        s.push_str(host);
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s
    }
}

/// Where lost connections are written down (one JSON line each) besides the tracing log.
#[derive(Debug, Default)]
pub struct ConnectionLog {
    file: Option<PathBuf>,
    events: Mutex<Vec<String>>,
}

impl ConnectionLog {
    pub fn new(file: Option<PathBuf>) -> Self {
        ConnectionLog {
            file,
            events: Mutex::new(Vec::new()),
        }
    }

    /// Records that the connection to `host` was lost while doing `what`.
    pub fn lost(&self, host: &str, what: &str, error: &str, attempt: u32) {
        tracing::warn!(
            host,
            what,
            error,
            attempt,
            "ssh connection lost; reconnecting"
        );
        let line = serde_json::json!({
            "time": chrono::Utc::now().to_rfc3339(),
            "host": host,
            "event": "connection-lost",
            "while": what,
            "error": error,
            "attempt": attempt,
        })
        .to_string();
        if let Some(path) = &self.file {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{line}");
            }
        }
        self.events.lock().unwrap().push(line);
    }

    /// Every loss so far, as JSON lines.
    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

/// A host and its (re)connectable SSH session.
pub struct HostSession {
    host: String,
    opts: SshOptions,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// Prefix remote commands with `sudo -n` (the user is not root).
    sudo: Mutex<bool>,
    control_dir: Mutex<Option<PathBuf>>,
    log: Arc<ConnectionLog>,
}

/// Why connecting failed, in words a user can act on.
pub fn explain_connect_error(host: &str, opts: &SshOptions, e: &openssh::Error) -> String {
    let mut detail = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !detail.contains(text.trim()) {
            if !detail.is_empty() {
                detail.push_str(": ");
            }
            detail.push_str(text.trim());
        }
        source = s.source();
    }
    let hint = if detail.contains("Permission denied") {
        "the key was refused: check --ssh-user and --ssh-private-key (or the IdentityFile in \
         ~/.ssh/config) and the host's authorized_keys"
    } else if detail.contains("Host key verification failed") || detail.contains("known_hosts") {
        "the host key is unknown or changed: add it to ~/.ssh/known_hosts (ssh-keyscan), or pass \
         --ssh-strict-host-key-checking false for throwaway VMs"
    } else {
        "check that the host is up, its address and --ssh-port, and that sshd runs on it"
    };
    format!(
        "cannot connect to {} over ssh: {}; {hint}",
        opts.describe(host),
        detail.replace('\n', " ")
    )
}

impl HostSession {
    pub fn new(host: &str, opts: SshOptions, log: Arc<ConnectionLog>) -> Self {
        HostSession {
            host: host.to_string(),
            opts,
            session: tokio::sync::Mutex::new(None),
            sudo: Mutex::new(false),
            control_dir: Mutex::new(None),
            log,
        }
    }

    /// Where the connection's master keeps its socket (default: the temp dir). A run puts its
    /// masters in a folder of its own, so that `clean` can find them after a SIGKILL.
    pub fn set_control_dir(&self, dir: PathBuf) {
        *self.control_dir.lock().unwrap() = Some(dir);
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn options(&self) -> &SshOptions {
        &self.opts
    }

    pub fn set_sudo(&self, sudo: bool) {
        *self.sudo.lock().unwrap() = sudo;
    }

    fn builder(&self) -> SessionBuilder {
        let mut b = SessionBuilder::default();
        b.connect_timeout(self.opts.connect_timeout)
            .server_alive_interval(Duration::from_secs(5))
            .control_directory(
                self.control_dir
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_else(std::env::temp_dir),
            )
            // A controller killed with SIGKILL cannot close its masters: they go when idle, or
            // when `clean` finds them by their control folder.
            .control_persist(ControlPersist::IdleFor(
                NonZeroUsize::new(600).expect("non-zero"),
            ));
        if self.opts.strict_host_key_checking {
            b.known_hosts_check(KnownHosts::Strict);
        } else {
            // Throwaway VMs: accept any key and write none into the user's known_hosts.
            b.known_hosts_check(KnownHosts::Accept)
                .user_known_hosts_file("/dev/null");
        }
        if let Some(u) = &self.opts.user {
            b.user(u.clone());
        }
        if let Some(p) = self.opts.port {
            b.port(p);
        }
        if let Some(k) = &self.opts.private_key {
            b.keyfile(k);
        }
        if let Some(c) = &self.opts.config_file {
            b.config_file(c);
        }
        b
    }

    /// Opens the connection (once); the error says what to fix.
    pub async fn connect(&self) -> Result<Arc<Session>> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        let session = self
            .builder()
            .connect_mux(&self.host)
            .await
            .map_err(|e| anyhow!(explain_connect_error(&self.host, &self.opts, &e)))?;
        let session = Arc::new(session);
        *guard = Some(session.clone());
        Ok(session)
    }

    /// Forgets a session that is no longer alive (the next command reconnects).
    async fn forget(&self, dead: &Arc<Session>) {
        let mut guard = self.session.lock().await;
        if guard.as_ref().is_some_and(|s| Arc::ptr_eq(s, dead)) {
            *guard = None;
        }
    }

    /// Runs `script` with `sh -c` on the host (under `sudo -n` for a non-root user), feeding it
    /// `stdin`; a lost connection is recorded and the script retried on a new one. The output is
    /// returned whatever the exit status.
    pub async fn run(&self, what: &str, script: &str, stdin: Option<&[u8]>) -> Result<Output> {
        let line = if *self.sudo.lock().unwrap() {
            format!("sudo -n sh -c {}", quote(script))
        } else {
            format!("sh -c {}", quote(script))
        };
        let mut attempt = 0;
        loop {
            let session = match self.connect().await {
                Ok(s) => s,
                Err(e) if attempt < self.opts.retries => {
                    attempt += 1;
                    self.log.lost(&self.host, what, &format!("{e:#}"), attempt);
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match run_once(&session, &line, stdin).await {
                Ok(out) => return Ok(out),
                Err(e) => {
                    // A failed command with a live master is the command's failure; a dead
                    // master is a lost connection.
                    let alive = session.check().await.is_ok();
                    if alive || attempt >= self.opts.retries {
                        return Err(anyhow!(
                            "{what} on {}: {}",
                            self.opts.describe(&self.host),
                            error_text(&e)
                        ));
                    }
                    attempt += 1;
                    self.log.lost(&self.host, what, &error_text(&e), attempt);
                    self.forget(&session).await;
                    tokio::time::sleep(backoff(attempt)).await;
                }
            }
        }
    }

    /// Like `run`, but a non-zero exit is an error carrying the command's stderr.
    pub async fn run_ok(&self, what: &str, script: &str, stdin: Option<&[u8]>) -> Result<Output> {
        let out = self.run(what, script, stdin).await?;
        if !out.status.success() {
            anyhow::bail!(
                "{what} on {} failed ({}): {}",
                self.opts.describe(&self.host),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    /// Closes the master connection.
    pub async fn close(&self) {
        let session = self.session.lock().await.take();
        if let Some(s) = session {
            match Arc::try_unwrap(s) {
                Ok(s) => {
                    let _ = s.close().await;
                }
                // Still in use elsewhere: dropping the last reference shuts the master down.
                Err(s) => drop(s),
            }
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250 * u64::from(attempt.min(8)))
}

fn error_text(e: &openssh::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

async fn run_once(
    session: &Session,
    line: &str,
    stdin: Option<&[u8]>,
) -> Result<Output, openssh::Error> {
    let mut cmd = session.raw_command(line);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    match stdin {
        None => {
            cmd.stdin(Stdio::null());
            cmd.output().await
        }
        Some(bytes) => {
            cmd.stdin(Stdio::piped());
            let mut child = cmd.spawn().await?;
            if let Some(mut input) = child.stdin().take() {
                input
                    .write_all(bytes)
                    .await
                    .map_err(openssh::Error::ChildIo)?;
                input.shutdown().await.map_err(openssh::Error::ChildIo)?;
            }
            child.wait_with_output().await
        }
    }
}

/// Context for errors of a host.
pub fn on_host<T>(r: Result<T>, host: &str) -> Result<T> {
    r.with_context(|| format!("host {host}"))
}
