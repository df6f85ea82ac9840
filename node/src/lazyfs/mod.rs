//! lazyfs: the power-loss filesystem under each node's dataDir (`fle-node lazyfs mount`).
//!
//! A FUSE filesystem that passes everything through to a backing directory but keeps file data
//! written and not yet fsynced in memory (modelled on Jepsen's lazyfs; written from its design,
//! no code taken). `fle-node lazyfs drop` is the power loss: the writes an fsync never covered are
//! forgotten, as a machine losing power would lose its page cache; optionally the last write is
//! torn at a seeded byte. A `kill -9` alone cannot show that, because the page cache survives it.
//!
//! Why a subcommand of fle-node: fle-node is already the one binary fle-chaos uploads to every SSH
//! host, so the filesystem runs wherever a node runs, with no second artefact to ship; it needs
//! only `/dev/fuse` and root (mounts with mount(2), no `fusermount`).
//!
//! Lifecycle: `mount` binds the control socket only once the mount is live (the socket existing
//! means mounted), serves until `unmount` (socket), SIGTERM/SIGINT, or an external `umount`.
//! If the process is SIGKILLed the mount is left "disconnected"; `umount -l` removes it
//! (fle-chaos clean does).

mod control;
mod fs;
mod overlay;

pub use control::{power_loss, request, ControlSocket, DropReport, DroppedFile, TornWrite};
pub use fs::{LazyFs, State};

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use fuser::{Config, MountOption, Session};
use nix::sys::signal::{SigSet, Signal};

/// The filesystem name shown in /proc/mounts (so `clean` can tell ours apart).
pub const FS_NAME: &str = "flc-lazyfs";

/// Mounts `backing` at `mount` and serves until unmounted. Blocks.
pub fn mount(backing: &Path, mount: &Path, control: &ControlSocket) -> anyhow::Result<()> {
    for (what, p) in [("backing directory", backing), ("mount point", mount)] {
        if !p.is_dir() {
            bail!(
                "{what} {} is not a directory (create it first)",
                p.display()
            );
        }
    }
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse is missing: this host has no FUSE (load the fuse module), so power-loss faults cannot run here");
    }
    let backing = backing
        .canonicalize()
        .with_context(|| format!("backing directory {}", backing.display()))?;
    // Signals go to one waiting thread; fuser's threads (spawned later) inherit the mask.
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGTERM);
    sigs.add(Signal::SIGINT);
    sigs.thread_block().context("blocking SIGTERM/SIGINT")?;

    let state = Arc::new(Mutex::new(State::new(backing)));
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName(FS_NAME.to_string()),
        MountOption::Subtype(FS_NAME.to_string()),
    ];
    let mut session = Session::new(
        LazyFs {
            state: state.clone(),
        },
        mount,
        &cfg,
    )
    .with_context(|| format!("mounting lazyfs at {}", mount.display()))?;

    let unmounter = Arc::new(Mutex::new(session.unmount_callable()));
    let listener = control
        .bind()
        .with_context(|| format!("binding the control socket {control}"))?;
    let u = unmounter.clone();
    std::thread::spawn(move || {
        control::serve(listener, state, move || {
            let _ = u.lock().map(|mut u| u.unmount());
        })
    });
    let u = unmounter.clone();
    std::thread::spawn(move || {
        if sigs.wait().is_ok() {
            let _ = u.lock().map(|mut u| u.unmount());
        }
    });
    println!("mounted {}", mount.display());
    let r = session.run();
    control.remove_file();
    r.with_context(|| format!("serving lazyfs at {}", mount.display()))
}

/// [`mount`] in the background: forks (before any thread exists), the child starts a session of
/// its own and serves with its output in `log`; the parent returns once the control socket
/// answers, printing the child's pid, or fails with the child's log.
pub fn mount_daemon(
    backing: &Path,
    mnt: &Path,
    control: &ControlSocket,
    log: &Path,
) -> anyhow::Result<()> {
    use nix::unistd::{fork, setsid, ForkResult};
    use std::os::fd::AsRawFd;
    control.remove_file();
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("lazyfs log {}", log.display()))?;
    // SAFETY: single-threaded here (main, before any runtime or thread), so fork is sound.
    match unsafe { fork() }.context("fork")? {
        ForkResult::Child => {
            let _ = setsid();
            // SAFETY: dup2 onto the standard descriptors of this (single-threaded) child.
            unsafe {
                libc::dup2(logf.as_raw_fd(), 1);
                libc::dup2(logf.as_raw_fd(), 2);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                libc::dup2(null, 0);
            }
            let code = match mount(backing, mnt, control) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("fle-node lazyfs: {e:#}");
                    1
                }
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                if request(control, "ping").is_ok() {
                    println!("{child}");
                    return Ok(());
                }
                let status =
                    nix::sys::wait::waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
                let exited = !matches!(status, Ok(nix::sys::wait::WaitStatus::StillAlive));
                if exited || std::time::Instant::now() > deadline {
                    if !exited {
                        let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                        // Reaped here, not left to whoever adopts it once this process exits.
                        let _ = nix::sys::wait::waitpid(child, None);
                    }
                    let text = std::fs::read_to_string(log).unwrap_or_default();
                    bail!(
                        "lazyfs at {} did not come up: {}",
                        mnt.display(),
                        text.lines().last().unwrap_or("(no output)")
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}
