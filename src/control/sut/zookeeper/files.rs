//! ZooKeeper's own data files, for the `corrupt` fault: which file of `dataDir/version-2` a
//! schedule's `file` names, and which bytes of it hold data.
//!
//! A txn log (`log.<zxid>`) is preallocated in 64 MB steps of zeros, so a damage drawn over the
//! whole file would almost always land in padding ZooKeeper never reads; it is drawn over the
//! records instead. A record is a checksum (8 bytes), a length-prefixed txn (4 + length) and an
//! end-of-record byte 'B' (`FileTxnLog`); a zero length is where the records end.

/// Where ZooKeeper keeps its files inside the node's folder.
pub const VERSION_DIR: &str = "data/version-2";

/// The file in `names` (the entries of `version-2`) that a schedule's `file` means: "txnlog"
/// the newest txn log, "snapshot" the newest snapshot (newest: highest zxid suffix), the epoch
/// files by name. None: no such file yet.
pub fn pick(names: &[String], file: &str) -> Option<String> {
    let newest = |prefix: &str| {
        names
            .iter()
            .filter_map(|n| {
                let zxid = u64::from_str_radix(n.strip_prefix(prefix)?, 16).ok()?;
                Some((zxid, n))
            })
            .max()
            .map(|(_, n)| n.clone())
    };
    match file {
        "txnlog" => newest("log."),
        "snapshot" => newest("snapshot."),
        other => names.iter().find(|n| *n == other).cloned(),
    }
}

/// How many leading bytes of a txn log hold its header and whole records (the rest is
/// preallocated zeros or a torn record).
pub fn txnlog_records_end(bytes: &[u8]) -> usize {
    const HEADER: usize = 16; // magic "ZKLG", version, dbid
    let mut pos = HEADER.min(bytes.len());
    while let Some(head) = bytes.get(pos..pos + 12) {
        let len = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        let Ok(len) = usize::try_from(len) else { break };
        let end = pos + 12 + len + 1;
        if len == 0 || end > bytes.len() {
            break;
        }
        pos = end;
    }
    pos
}

/// Damages the file `name` (its `bytes`) as `seed` says: a txn log within its records, any
/// other file anywhere (`corrupt::damage`). A truncation drops the padding after it too.
pub fn damage(
    name: &str,
    bytes: &mut Vec<u8>,
    seed: u64,
) -> crate::control::fault::corrupt::Damage {
    let used = if is_txnlog(name) {
        txnlog_records_end(bytes)
    } else {
        bytes.len()
    };
    let mut head = bytes[..used].to_vec();
    let d = crate::control::fault::corrupt::damage(name, &mut head, seed);
    if head.len() < used {
        *bytes = head;
    } else {
        bytes[..used].copy_from_slice(&head);
    }
    d
}

fn is_txnlog(name: &str) -> bool {
    name.rsplit('/')
        .next()
        .is_some_and(|n| n.starts_with("log."))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A txn log as FileTxnLog writes it: header, `records` records of `len` bytes, padding.
    fn txnlog(records: usize, len: usize) -> Vec<u8> {
        let mut b = b"ZKLG".to_vec();
        b.extend(2i32.to_be_bytes());
        b.extend(0u64.to_be_bytes());
        for r in 0..records {
            b.extend((r as u64 + 7).to_be_bytes()); // checksum
            b.extend((len as i32).to_be_bytes());
            b.extend(std::iter::repeat_n(r as u8 + 1, len));
            b.push(b'B');
        }
        b.extend(std::iter::repeat_n(0u8, 4096));
        b
    }

    #[test]
    fn the_records_end_before_the_padding_and_a_torn_record() {
        assert_eq!(txnlog_records_end(&txnlog(0, 0)), 16);
        assert_eq!(txnlog_records_end(&txnlog(3, 40)), 16 + 3 * 53);
        let mut torn = txnlog(3, 40);
        torn.truncate(16 + 2 * 53 + 20);
        assert_eq!(txnlog_records_end(&torn), 16 + 2 * 53);
        assert_eq!(txnlog_records_end(b"ZKLG"), 4);
    }

    #[test]
    fn a_txnlog_is_damaged_within_its_records_and_never_in_the_padding() {
        let orig = txnlog(5, 60);
        let used = txnlog_records_end(&orig);
        for seed in 0..80 {
            let mut b = orig.clone();
            let d = damage("data/version-2/log.100000001", &mut b, seed);
            assert!(d.offset + d.length <= used as u64, "{d:?} past {used}");
            assert_eq!(d.size, used as u64);
            if d.op == "truncate" {
                assert_eq!(b.len() as u64, d.offset, "{d:?}");
            } else {
                assert_eq!(b.len(), orig.len());
                assert_ne!(b[..used], orig[..used], "{d:?} changed nothing");
                assert_eq!(b[used..], orig[used..], "the padding stays");
            }
        }
        // Any other file is damaged anywhere in it.
        let mut epoch = b"5\n".to_vec();
        let d = damage("data/version-2/currentEpoch", &mut epoch, 3);
        assert_eq!(d.size, 2);
        assert_ne!(epoch, b"5\n".to_vec());
    }

    #[test]
    fn pick_takes_the_newest_by_zxid_not_by_name() {
        let names: Vec<String> = [
            "log.100000001",
            "log.ff",
            "snapshot.0",
            "snapshot.10000003a",
            "acceptedEpoch",
            "currentEpoch",
            "log.100000001.bak",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(pick(&names, "txnlog").as_deref(), Some("log.100000001"));
        assert_eq!(
            pick(&names, "snapshot").as_deref(),
            Some("snapshot.10000003a")
        );
        assert_eq!(
            pick(&names, "currentEpoch").as_deref(),
            Some("currentEpoch")
        );
        assert_eq!(pick(&names[..1], "snapshot"), None);
    }
}
