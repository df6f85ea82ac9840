//! The writes a power loss would lose: per file, every write since its last fsync, in order.
//!
//! Pure bookkeeping (no I/O) so the rules are unit-tested: a read sees the backing bytes with the
//! pending writes laid over them; an fsync hands the writes out to be applied; a power loss
//! forgets them, optionally keeping a prefix of the very last write (a torn write).

use std::collections::HashMap;

/// Pending (not yet fsynced) writes of one file.
#[derive(Debug, Default, Clone)]
pub struct Pending {
    /// (offset, bytes) in the order written; a write that continues the previous one is merged
    /// into it so an append-only log keeps one entry per fsync interval.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// The file's size as readers see it (backing size grown by the pending writes).
    pub size: u64,
}

impl Pending {
    /// Bytes held in memory.
    pub fn bytes(&self) -> u64 {
        self.writes.iter().map(|(_, b)| b.len() as u64).sum()
    }

    /// Lays the pending writes over `buf`, which holds the file's bytes from `offset`.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        for (woff, data) in &self.writes {
            let wend = woff + data.len() as u64;
            let (from, to) = (offset.max(*woff), end.min(wend));
            if from < to {
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&data[(from - woff) as usize..(to - woff) as usize]);
            }
        }
    }
}

/// The last write made (for tearing): which file, where, how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastWrite {
    pub ino: u64,
    pub offset: u64,
    pub len: u64,
}

/// Every file's pending writes, keyed by inode.
#[derive(Debug, Default)]
pub struct Overlay {
    files: HashMap<u64, Pending>,
    last: Option<LastWrite>,
}

impl Overlay {
    pub fn get(&self, ino: u64) -> Option<&Pending> {
        self.files.get(&ino)
    }

    /// Records a write to `ino`, whose durable (backing) size is `backing_size`.
    pub fn write(&mut self, ino: u64, backing_size: u64, offset: u64, data: &[u8]) {
        let p = self.files.entry(ino).or_insert_with(|| Pending {
            writes: Vec::new(),
            size: backing_size,
        });
        match p.writes.last_mut() {
            Some((woff, buf)) if *woff + buf.len() as u64 == offset => buf.extend_from_slice(data),
            _ => p.writes.push((offset, data.to_vec())),
        }
        p.size = p.size.max(offset + data.len() as u64);
        self.last = Some(LastWrite {
            ino,
            offset,
            len: data.len() as u64,
        });
    }

    /// Takes the pending writes of `ino` to be made durable (fsync, truncate).
    pub fn take(&mut self, ino: u64) -> Option<Pending> {
        if self.last.is_some_and(|l| l.ino == ino) {
            self.last = None;
        }
        self.files.remove(&ino)
    }

    /// Forgets a file (unlinked).
    pub fn forget(&mut self, ino: u64) {
        self.take(ino);
    }

    pub fn last(&self) -> Option<LastWrite> {
        self.last
    }

    /// Power loss: everything pending, emptied out.
    pub fn drain(&mut self) -> Vec<(u64, Pending)> {
        self.last = None;
        let mut all: Vec<_> = self.files.drain().collect();
        all.sort_by_key(|(ino, _)| *ino);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_pending_writes_in_order_and_appends_merge() {
        let mut o = Overlay::default();
        o.write(7, 4, 4, b"abcd");
        o.write(7, 4, 8, b"ef");
        o.write(7, 4, 5, b"X");
        let p = o.get(7).unwrap();
        assert_eq!(
            p.writes.len(),
            2,
            "the append merged, the overwrite did not"
        );
        assert_eq!(p.size, 10);
        let mut buf = *b"0123______";
        p.overlay(0, &mut buf);
        assert_eq!(&buf, b"0123aXcdef");
        let mut mid = [0u8; 3];
        p.overlay(3, &mut mid);
        assert_eq!(
            &mid,
            b"3aX".map(|c| if c == b'3' { 0 } else { c }).as_slice()
        );
        assert_eq!(
            o.last(),
            Some(LastWrite {
                ino: 7,
                offset: 5,
                len: 1
            })
        );
    }

    #[test]
    fn take_and_drain_empty_the_overlay() {
        let mut o = Overlay::default();
        o.write(1, 0, 0, b"a");
        o.write(2, 0, 0, b"bb");
        assert_eq!(o.take(2).unwrap().bytes(), 2);
        assert_eq!(o.last(), None, "the last write was made durable");
        let d = o.drain();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, 1);
        assert!(o.get(1).is_none());
    }
}
