//! Each node's dataDir on lazyfs, the power-loss filesystem (`fle-node lazyfs`, see
//! `fle_node::lazyfs`): mounting it before the node first starts, the power loss itself, and
//! removing the mount.
//!
//! The filesystem process is fle-node's own subcommand, started in the node machine's own
//! namespaces (`Control::exec_host`) so that every later start of the node sees the mount; it is
//! recorded (`Resource::LazyFs`) before it exists. Unmounting ends the process, so teardown and
//! `clean` only unmount (`umount2(MNT_DETACH)`, which also removes the dead mount a SIGKILLed
//! filesystem leaves), then check that the process is gone.
//!
//! The control socket is an abstract one named after the run and the node (`control_socket`):
//! a socket file in the node's folder would put a 107-byte limit on where `--out` and a sweep's
//! deep run folders may live, and an abstract name leaves nothing on disk to remove.

use crate::control::backend::registry::Resource;
use crate::control::Control;
use anyhow::{bail, Context, Result};
use fle_node::lazyfs::{ControlSocket, DropReport};
use std::path::Path;

/// The node folder's entries: the mount (the node's dataDir) and the backing directory.
pub const MOUNT: &str = "data";
pub const BACKING: &str = "data.durable";
pub const LOG: &str = "lazyfs.log";

/// The node's control socket: `@flc-lazyfs-<run id>-<node>`, unique on a host while the run's
/// registry holds its id, and the same length wherever the run folder is.
pub fn control_socket(control: &dyn Control, node: &str) -> ControlSocket {
    ControlSocket::Abstract(format!("flc-lazyfs-{}-{node}", control.registry().run_id()))
}

/// Makes the node's dataDir (`data`) with its `myid` file: on lazyfs when `lazyfs` names
/// the binary that serves it (the run has power-loss faults), else a plain folder. On lazyfs
/// myid goes straight into the backing folder: written through the mount it would not be
/// fsynced, and the first power loss would take it.
pub fn data_dir_with_myid(
    control: &dyn Control,
    node: &str,
    lazyfs: Option<&Path>,
    myid: &[u8],
) -> Result<()> {
    match lazyfs {
        Some(binary) => {
            control.write_file(node, &Path::new(BACKING).join("myid"), myid)?;
            mount(control, node, binary)
        }
        None => control
            .write_file(node, &Path::new(MOUNT).join("myid"), myid)
            .map(drop),
    }
}

/// Wipes a stopped node's dataDir (`data`, on lazyfs or not) down to its `myid` file, written
/// durably: through a lazyfs mount a write is kept only once fsynced (`sync FILE`), and the
/// next power loss would otherwise take it.
pub fn wipe_data_dir(control: &dyn Control, node: &str, myid: &[u8]) -> Result<()> {
    control.empty_dir(node, Path::new(MOUNT))?;
    let file = control.write_file(node, &Path::new(MOUNT).join("myid"), myid)?;
    let file = file.to_string_lossy();
    (control.exec_host_ok(node, &format!("fsync {file}"), "sync", &[&file])).map(drop)
}

/// Mounts lazyfs at the node's `data` folder (backed by `data.durable`), recording it first.
pub fn mount(control: &dyn Control, node: &str, binary: &Path) -> Result<()> {
    let dir = control.node_dir(node)?;
    let (mnt, backing) = (dir.join(MOUNT), dir.join(BACKING));
    let sock = control_socket(control, node);
    control.registry().record(Resource::LazyFs {
        node: node.to_string(),
        mount: mnt.clone(),
        control: sock.to_string(),
    })?;
    for d in [&mnt, &backing] {
        let rel = d.strip_prefix(&dir).unwrap_or(d);
        // Through the Control so it lands where the node runs; `.keep` makes the folder.
        control.write_file(node, &rel.join(".keep"), b"")?;
    }
    let mnt_s = mnt.display().to_string();
    let (backing_s, sock_s) = (backing.display().to_string(), sock.to_string());
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
    // The filesystem's pid (`mount_daemon` prints it): it outlives this command, so whoever
    // reaps the node's processes reaps it too.
    if let Some(pid) = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
    {
        control.adopt(node, pid);
    }
    Ok(())
}

/// A target's power loss of a stopped node: its dataDir's lazyfs, served by `lazyfs` (None:
/// the run mounted none, having no power-loss faults), forgets the un-fsynced writes.
pub fn power_loss(
    control: &dyn Control,
    node: &str,
    lazyfs: Option<&Path>,
    tear_seed: Option<u64>,
) -> Result<DropReport> {
    let Some(binary) = lazyfs else {
        bail!("{node}: its dataDir is not on lazyfs (no power-loss in the schedule)");
    };
    drop_unsynced(control, node, binary, tear_seed)
}

/// The power loss of a stopped node: forgets its un-fsynced writes (tearing the last one when
/// `tear_seed` is set) and returns exactly what was lost.
pub fn drop_unsynced(
    control: &dyn Control,
    node: &str,
    binary: &Path,
    tear_seed: Option<u64>,
) -> Result<DropReport> {
    let sock = control_socket(control, node).to_string();
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
