//! Each node's dataDir on lazyfs, the power-loss filesystem (`fle-node lazyfs`, see
//! `fle_node::lazyfs`): mounting it before the node first starts, the power loss itself, and
//! removing the mount.
//!
//! The filesystem process is fle-node's own subcommand, started in the node machine's own
//! namespaces (`Control::exec_host`) so that every later start of the node sees the mount; it is
//! recorded (`Resource::LazyFs`) before it exists. Unmounting ends the process, so teardown and
//! `clean` only unmount (`umount2(MNT_DETACH)`, which also removes the dead mount a SIGKILLed
//! filesystem leaves), then check that the process is gone.

use super::registry::Resource;
use super::Control;
use anyhow::{bail, Context, Result};
use fle_node::lazyfs::DropReport;
use std::path::Path;

/// The node folder's entries: the mount (the node's dataDir) and the backing directory.
pub const MOUNT: &str = "data";
pub const BACKING: &str = "data.durable";
pub const SOCKET: &str = "lazyfs.sock";
pub const LOG: &str = "lazyfs.log";
/// The longest path a Unix socket can be bound to (Linux `sun_path`, 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Mounts lazyfs at the node's `data` folder (backed by `data.durable`), recording it first.
pub fn mount(control: &dyn Control, node: &str, binary: &Path) -> Result<()> {
    let dir = control.node_dir(node)?;
    let (mnt, backing, sock) = (dir.join(MOUNT), dir.join(BACKING), dir.join(SOCKET));
    // sun_path holds 108 bytes with the terminating NUL: a longer path cannot be bound.
    let sock_len = sock.as_os_str().len();
    if sock_len > MAX_SOCKET_PATH {
        bail!(
            "{node}: the power-loss control socket {} is {sock_len} bytes long, over the \
             {MAX_SOCKET_PATH} a Unix socket path allows: use a shorter --out",
            sock.display()
        );
    }
    control.registry().record(Resource::LazyFs {
        node: node.to_string(),
        mount: mnt.clone(),
        control: sock.clone(),
    })?;
    for d in [&mnt, &backing] {
        let rel = d.strip_prefix(&dir).unwrap_or(d);
        // Through the Control so it lands where the node runs; `.keep` makes the folder.
        control.write_file(node, &rel.join(".keep"), b"")?;
    }
    let mnt_s = mnt.display().to_string();
    let (backing_s, sock_s) = (backing.display().to_string(), sock.display().to_string());
    let log_s = dir.join(LOG).display().to_string();
    let out = control.exec_host(
        node,
        &binary.display().to_string(),
        &[
            "lazyfs",
            "mount",
            "--backing",
            &backing_s,
            "--mount",
            &mnt_s,
            "--control",
            &sock_s,
            "--daemon-log",
            &log_s,
        ],
    )?;
    if !out.status.success() {
        bail!(
            "{node}: could not mount lazyfs (power-loss faults need FUSE: /dev/fuse and root): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The power loss of a stopped node: forgets its un-fsynced writes (tearing the last one when
/// `tear_seed` is set) and returns exactly what was lost.
pub fn drop_unsynced(
    control: &dyn Control,
    node: &str,
    binary: &Path,
    tear_seed: Option<u64>,
) -> Result<DropReport> {
    let sock = control.node_dir(node)?.join(SOCKET).display().to_string();
    let seed = tear_seed.map(|s| s.to_string());
    let mut args = vec!["lazyfs", "drop", "--control", &sock];
    if let Some(s) = &seed {
        args.extend(["--tear-seed", s]);
    }
    let out = control.exec_host(node, &binary.display().to_string(), &args)?;
    if !out.status.success() {
        bail!(
            "{node}: lazyfs drop failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "{node}: lazyfs drop answered {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Whether `path` is a mount point of ours (fsname `flc-lazyfs` in /proc/mounts).
pub fn is_mounted(path: &Path) -> bool {
    let want = path.display().to_string();
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let mut f = l.split(' ');
            f.next() == Some(fle_node::lazyfs::FS_NAME) && f.next() == Some(want.as_str())
        })
}

/// Removes a local lazyfs mount (teardown, clean): a lazy unmount, which also clears the dead
/// mount of a killed filesystem process; the process ends by itself once unmounted.
pub fn unmount_local(mount: &Path) -> Result<bool> {
    if !is_mounted(mount) {
        return Ok(false);
    }
    let c = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid C string; umount2 has no other preconditions.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        bail!(
            "umount {}: {}",
            mount.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(true)
}
