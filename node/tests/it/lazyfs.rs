//! lazyfs on a real FUSE mount: a write made and fsynced survives a power loss, one not fsynced
//! is gone, a torn write keeps exactly a prefix, and fle-node's own txnlog loses only what it
//! never fsynced. Mounts are named flc-* and removed on every path (guard's Drop).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fle_node::lazyfs::DropReport;
use fle_node::txnlog::{Txn, TxnLog};

/// A mounted lazyfs; unmounts and kills its process when dropped, whatever happened.
struct Mounted {
    child: Child,
    mount: PathBuf,
    backing: PathBuf,
    control: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mounted {
    fn new() -> Option<Mounted> {
        // Not a silent skip: this machine kind has FUSE, so its absence is a failure.
        assert!(
            Path::new("/dev/fuse").exists(),
            "these tests need /dev/fuse (FUSE)"
        );
        let dir = tempfile::Builder::new()
            .prefix("flc-lazyfs-test")
            .tempdir()
            .unwrap();
        let (backing, mount) = (dir.path().join("backing"), dir.path().join("mnt"));
        std::fs::create_dir(&backing).unwrap();
        std::fs::create_dir(&mount).unwrap();
        let control = dir.path().join("control.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_fle-node"))
            .args(["lazyfs", "mount", "--backing"])
            .arg(&backing)
            .arg("--mount")
            .arg(&mount)
            .arg("--control")
            .arg(&control)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let m = Mounted {
            child,
            mount,
            backing,
            control,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !m.control.exists() {
            assert!(Instant::now() < deadline, "lazyfs did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(m)
    }

    fn power_loss(&self, tear_seed: Option<u64>) -> DropReport {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fle-node"));
        cmd.args(["lazyfs", "drop", "--control"]).arg(&self.control);
        if let Some(s) = tear_seed {
            cmd.args(["--tear-seed", &s.to_string()]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Ok(c) = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()) {
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn append(path: &Path, bytes: &[u8]) -> File {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
    f
}

#[test]
fn fsynced_writes_survive_a_power_loss_and_the_rest_is_gone() {
    let Some(m) = Mounted::new() else { return };
    let durable = m.mount.join("durable");
    let f = append(&durable, b"fsynced|");
    f.sync_data().unwrap();
    drop(f);
    append(&durable, b"not-fsynced");
    append(&m.mount.join("never"), b"never fsynced at all");
    assert_eq!(std::fs::read(&durable).unwrap(), b"fsynced|not-fsynced");
    // Closing is not fsync: the backing file has only the fsynced part so far.
    assert_eq!(
        std::fs::read(m.backing.join("durable")).unwrap(),
        b"fsynced|"
    );

    let report = m.power_loss(None);
    assert_eq!(std::fs::read(&durable).unwrap(), b"fsynced|");
    assert_eq!(std::fs::read(m.mount.join("never")).unwrap(), b"");
    assert_eq!(report.dropped.len(), 2, "{report:?}");
    let d = report.dropped.iter().find(|d| d.file == "durable").unwrap();
    assert_eq!((d.from_offset, d.bytes), (8, 11));
    assert!(report.torn.is_none());
    // A second power loss with nothing pending loses nothing.
    assert!(m.power_loss(None).dropped.is_empty());
}

#[test]
fn a_torn_write_keeps_exactly_a_seeded_prefix() {
    let Some(m) = Mounted::new() else { return };
    let p = m.mount.join("log");
    append(&p, b"base").sync_data().unwrap();
    let last = b"0123456789abcdefghij";
    append(&p, last);
    let r = m.power_loss(Some(42));
    let torn = r.torn.expect("a torn write");
    assert_eq!((torn.file.as_str(), torn.offset, torn.len), ("log", 4, 20));
    assert!(torn.kept < 20);
    let mut want = b"base".to_vec();
    want.extend_from_slice(&last[..torn.kept as usize]);
    assert_eq!(std::fs::read(&p).unwrap(), want);
}

#[test]
fn the_txnlog_loses_only_what_it_never_fsynced() {
    let Some(m) = Mounted::new() else { return };
    let path = m.mount.join("txnlog");
    let txn = |z: u64| Txn {
        zxid: z,
        value: serde_json::json!(z),
    };
    {
        let (mut log, _) = TxnLog::open(&path).unwrap();
        log.append(&[txn(1), txn(2)]).unwrap();
        log.sync().unwrap();
        log.append(&[txn(3)]).unwrap();
        // The process "dies" here without an fsync.
    }
    let (log, _) = TxnLog::open(&path).unwrap();
    assert_eq!(log.last_zxid(), 3, "before a power loss nothing is lost");
    drop(log);
    m.power_loss(None);
    let (log, repair) = TxnLog::open(&path).unwrap();
    assert_eq!(
        log.last_zxid(),
        2,
        "the un-fsynced txn 3 is gone, 1 and 2 stay"
    );
    assert!(
        repair.is_none(),
        "a clean cut at a record boundary needs no repair"
    );
}
