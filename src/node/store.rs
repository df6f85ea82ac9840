//! The server's durable state: `acceptedEpoch`, `currentEpoch` and (until the durable log of
//! Zab exists) the last logged zxid, read from a `lastZxid` file in dataDir.
//!
//! Epoch files are decimal text written atomically (tmp file, fsync, rename, fsync of the
//! directory) so a crash leaves either the old or the new value, never a torn one.
//! The Zab store replaces the internals; the getters and setters are the seam.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::api::epoch_of;

pub const ACCEPTED_EPOCH: &str = "acceptedEpoch";
pub const CURRENT_EPOCH: &str = "currentEpoch";
pub const LAST_ZXID: &str = "lastZxid";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {what}")]
    Bad { path: PathBuf, what: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    accepted_epoch: u64,
    current_epoch: u64,
    last_zxid: u64,
}

impl Store {
    /// Opens dataDir, creating the epoch files like ZooKeeper does when they are absent.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let last_zxid = read_number(&dir.join(LAST_ZXID), true)?.unwrap_or(0);
        let mut store = Store {
            dir: dir.to_path_buf(),
            accepted_epoch: 0,
            current_epoch: 0,
            last_zxid,
        };
        match read_number(&dir.join(CURRENT_EPOCH), false)? {
            Some(e) => store.current_epoch = e,
            None => store.set_current_epoch(epoch_of(last_zxid))?,
        }
        match read_number(&dir.join(ACCEPTED_EPOCH), false)? {
            Some(e) => store.accepted_epoch = e,
            None => store.set_accepted_epoch(store.current_epoch)?,
        }
        if store.accepted_epoch < store.current_epoch {
            return Err(StoreError::Bad {
                path: dir.join(ACCEPTED_EPOCH),
                what: format!(
                    "acceptedEpoch {} is less than currentEpoch {}: the data dir is corrupt \
                     (restore it from a backup or wipe it to rejoin as a new server)",
                    store.accepted_epoch, store.current_epoch
                ),
            });
        }
        Ok(store)
    }

    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }
    pub fn accepted_epoch(&self) -> u64 {
        self.accepted_epoch
    }
    pub fn last_logged_zxid(&self) -> u64 {
        self.last_zxid
    }

    pub fn set_accepted_epoch(&mut self, epoch: u64) -> Result<(), StoreError> {
        write_atomically(&self.dir, ACCEPTED_EPOCH, epoch)?;
        self.accepted_epoch = epoch;
        Ok(())
    }

    pub fn set_current_epoch(&mut self, epoch: u64) -> Result<(), StoreError> {
        write_atomically(&self.dir, CURRENT_EPOCH, epoch)?;
        self.current_epoch = epoch;
        Ok(())
    }
}

/// Reads a number file; `None` when absent. `hex_ok` also takes `0x...` (for lastZxid).
fn read_number(path: &Path, hex_ok: bool) -> Result<Option<u64>, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) if hex_ok => u64::from_str_radix(hex, 16).ok(),
        _ => t.parse::<u64>().ok(),
    };
    let expected = if hex_ok {
        "a decimal or 0x-hex number"
    } else {
        "a decimal number"
    };
    parsed.map(Some).ok_or_else(|| StoreError::Bad {
        path: path.to_path_buf(),
        what: format!("{t:?} is not {expected} (fix or remove the file)"),
    })
}

fn write_atomically(dir: &Path, name: &str, value: u64) -> Result<(), StoreError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| StoreError::Io { path: p, source }
    };
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(value.to_string().as_bytes())
        .map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    // The rename is durable only once the directory entry is.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_dir_gets_zero_epochs_written_to_disk() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(
            (s.current_epoch(), s.accepted_epoch(), s.last_logged_zxid()),
            (0, 0, 0)
        );
        assert_eq!(
            fs::read_to_string(dir.path().join(CURRENT_EPOCH)).unwrap(),
            "0"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join(ACCEPTED_EPOCH)).unwrap(),
            "0"
        );
    }

    #[test]
    fn epochs_survive_reopen_and_last_zxid_reads_hex() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(LAST_ZXID), "0x200000009\n").unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        assert_eq!(s.last_logged_zxid(), 0x2_0000_0009);
        assert_eq!(
            s.current_epoch(),
            2,
            "currentEpoch defaults to the zxid's epoch"
        );
        s.set_accepted_epoch(4).unwrap();
        s.set_current_epoch(3).unwrap();
        let s = Store::open(dir.path()).unwrap();
        assert_eq!((s.accepted_epoch(), s.current_epoch()), (4, 3));
        assert!(!dir.path().join("currentEpoch.tmp").exists());
    }

    #[test]
    fn accepted_below_current_is_a_clear_fatal_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CURRENT_EPOCH), "5").unwrap();
        fs::write(dir.path().join(ACCEPTED_EPOCH), "4").unwrap();
        let e = Store::open(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("acceptedEpoch 4 is less than currentEpoch 5"),
            "{e}"
        );
    }

    #[test]
    fn garbage_in_a_number_file_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CURRENT_EPOCH), "five").unwrap();
        let e = Store::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("currentEpoch") && e.contains("\"five\""), "{e}");
    }
}
