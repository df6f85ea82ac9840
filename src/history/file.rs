//! The history on disk, in either of its two shapes, behind one opener.
//!
//! - `history.jsonl.zst` is what a run writes: independent zstd frames, each holding whole
//!   lines (the writer closes one each second or 4 MiB, see `store`), so a controller killed
//!   mid-run loses at most the last second and the file stays readable. `zstdcat` prints it.
//! - `history.jsonl` is the plain text: fixtures, hand-made histories, runs of older versions,
//!   and a history someone decompressed to edit.
//!
//! [`HistoryFile::open`] tells them apart by their first bytes (a zstd frame's magic number),
//! not by name, and hands out [`Reader`]s that read and seek in the PLAIN text whichever the
//! shape: every offset a reader keeps (evidence quotes, the history view's index search, the
//! parallel parts' cuts) is a plain-text offset, so nothing above this module knows whether a
//! history was compressed. A compressed file is held in memory compressed (a 60 s run is about
//! 0.5 MB) and decompressed one frame at a time, on demand.
//!
//! The torn-tail rule, for frames: a last frame cut short (the writer died during its write)
//! is forgiven and ends the history, as an unterminated last line is in plain text; anything
//! else that is not a zstd frame, or a frame whose checksum fails, is damage and an error
//! naming the file and the byte.

use anyhow::{Context, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The history a run writes (compressed).
pub const WRITTEN: &str = "history.jsonl.zst";
/// The plain history (fixtures, hand-made and older runs).
pub const PLAIN: &str = "history.jsonl";
/// Both names, for code that lists a run folder's files.
pub const NAMES: [&str; 2] = [WRITTEN, PLAIN];

/// What a run folder must hold, for the errors that find it missing.
pub const RUN_FOLDER_NEEDS: &str =
    "a run folder needs a readable test.json and history.jsonl.zst (or a plain history.jsonl)";

/// The history of the run folder `run_dir`: the compressed file when there is one, else the
/// plain one (which may not exist either: the opener names it in its error).
pub fn in_run(run_dir: &Path) -> PathBuf {
    let written = run_dir.join(WRITTEN);
    if written.exists() {
        written
    } else {
        run_dir.join(PLAIN)
    }
}

/// Whether `run_dir` holds a history in either shape.
pub fn exists_in(run_dir: &Path) -> bool {
    NAMES.iter().any(|n| run_dir.join(n).is_file())
}

/// The whole plain text of the history at `path` (tests and small tools; readers that walk
/// events use `history::read`).
pub fn read_text(path: &Path) -> Result<String> {
    let file = HistoryFile::open(path)?;
    let mut text = String::with_capacity(file.len() as usize);
    file.reader()?
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read history {}", path.display()))?;
    Ok(text)
}

/// An opened history: cheap to clone (threads reading parts share it).
#[derive(Clone)]
pub struct HistoryFile {
    path: PathBuf,
    content: Arc<Content>,
}

enum Content {
    Plain { len: u64 },
    Frames(Frames),
}

/// A compressed history: its bytes and where each frame is.
struct Frames {
    data: Vec<u8>,
    frames: Vec<Frame>,
    len: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Where the frame is in the compressed bytes.
    at: usize,
    size: usize,
    /// Where its text starts in the plain text, and how long it is.
    plain_start: u64,
    plain_len: u64,
}

/// A zstd frame's first four bytes (little-endian 0xFD2FB528).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

impl HistoryFile {
    pub fn open(path: &Path) -> Result<HistoryFile> {
        let mut file = std::fs::File::open(path)
            .with_context(|| format!("cannot open history {}", path.display()))?;
        let mut data = Vec::new();
        (&mut file)
            .take(ZSTD_MAGIC.len() as u64)
            .read_to_end(&mut data)
            .with_context(|| format!("cannot read history {}", path.display()))?;
        let content = if data == ZSTD_MAGIC {
            file.read_to_end(&mut data)
                .with_context(|| format!("cannot read history {}", path.display()))?;
            Content::Frames(Frames::index(path, data)?)
        } else {
            let len = file
                .metadata()
                .with_context(|| format!("cannot read history {}", path.display()))?
                .len();
            Content::Plain { len }
        };
        Ok(HistoryFile {
            path: path.to_path_buf(),
            content: Arc::new(content),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The plain text's length in bytes.
    pub fn len(&self) -> u64 {
        match &*self.content {
            Content::Plain { len } => *len,
            Content::Frames(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the file on disk is compressed.
    pub fn compressed(&self) -> bool {
        matches!(&*self.content, Content::Frames(_))
    }

    /// A reader of the plain text, at its start.
    pub fn reader(&self) -> Result<Reader> {
        let source = match &*self.content {
            Content::Plain { .. } => Source::Plain(
                std::fs::File::open(&self.path)
                    .with_context(|| format!("cannot open history {}", self.path.display()))?,
            ),
            Content::Frames(_) => Source::Frames {
                file: self.clone(),
                pos: 0,
                current: None,
            },
        };
        Ok(Reader { source })
    }
}

impl Frames {
    /// Finds every frame of `data`; a last frame cut short is dropped (the torn tail).
    fn index(path: &Path, data: Vec<u8>) -> Result<Frames> {
        let (mut frames, mut at, mut plain) = (Vec::new(), 0usize, 0u64);
        while at < data.len() {
            let rest = &data[at..];
            let size = match zstd::zstd_safe::find_frame_compressed_size(rest) {
                Ok(size) => size,
                // Cut short while being written: only ever the last thing in the file.
                Err(code) if is_truncated(code) => break,
                Err(code) => anyhow::bail!(
                    "{}: byte {at}: not a zstd frame ({}); the history is damaged: re-run the \
                     test, or cut the file before this byte",
                    path.display(),
                    zstd::zstd_safe::get_error_name(code)
                ),
            };
            let frame = &rest[..size];
            let plain_len = match zstd::zstd_safe::get_frame_content_size(frame) {
                Ok(Some(n)) => n,
                // A frame written without its size (another tool's): learn it by decompressing.
                _ => decompress(path, at, frame, None)?.len() as u64,
            };
            frames.push(Frame {
                at,
                size,
                plain_start: plain,
                plain_len,
            });
            at += size;
            plain += plain_len;
        }
        Ok(Frames {
            data,
            frames,
            len: plain,
        })
    }

    /// The frame holding plain offset `pos` (None at or past the end).
    fn frame_at(&self, pos: u64) -> Option<usize> {
        if pos >= self.len {
            return None;
        }
        let i = self
            .frames
            .partition_point(|f| f.plain_start + f.plain_len <= pos);
        (i < self.frames.len()).then_some(i)
    }
}

/// Whether a zstd error says the input ended too soon (zstd returns an error as the
/// negated code).
fn is_truncated(code: zstd::zstd_safe::ErrorCode) -> bool {
    use zstd::zstd_safe::zstd_sys::ZSTD_ErrorCode;
    code == (ZSTD_ErrorCode::ZSTD_error_srcSize_wrong as usize).wrapping_neg()
}

fn decompress(path: &Path, at: usize, frame: &[u8], len: Option<u64>) -> Result<Vec<u8>> {
    let out = match len {
        Some(len) => zstd::bulk::decompress(frame, len as usize),
        None => zstd::stream::decode_all(frame),
    };
    out.map_err(|e| damaged_frame(path, at, e))
}

fn damaged_frame(path: &Path, at: usize, e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: the zstd frame at byte {at} does not decompress ({e}); the history is damaged: \
         re-run the test, or cut the file before this byte",
        path.display()
    )
}

fn invalid_data(e: anyhow::Error) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

/// Reads and seeks in a history's plain text.
pub struct Reader {
    source: Source,
}

enum Source {
    Plain(std::fs::File),
    Frames {
        file: HistoryFile,
        /// The plain offset the next read starts at.
        pos: u64,
        /// The last frame decompressed: its number and text.
        current: Option<(usize, Vec<u8>)>,
    },
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.source {
            Source::Plain(f) => f.read(buf),
            Source::Frames { file, pos, current } => {
                let Content::Frames(frames) = &*file.content else {
                    unreachable!("a frames reader is made from frames only")
                };
                let Some(i) = frames.frame_at(*pos) else {
                    return Ok(0);
                };
                let f = frames.frames[i];
                let compressed = &frames.data[f.at..f.at + f.size];
                // A whole frame that fits goes straight into the caller's buffer (the
                // sequential readers' usual case: no second copy of the text).
                if *pos == f.plain_start && buf.len() as u64 >= f.plain_len {
                    let n = zstd::bulk::decompress_to_buffer(compressed, buf)
                        .map_err(|e| invalid_data(damaged_frame(&file.path, f.at, e)))?;
                    *pos += n as u64;
                    return Ok(n);
                }
                if current.as_ref().is_none_or(|(c, _)| *c != i) {
                    let text = decompress(&file.path, f.at, compressed, Some(f.plain_len))
                        .map_err(invalid_data)?;
                    *current = Some((i, text));
                }
                let (_, text) = current.as_ref().expect("set just above");
                let from = (*pos - f.plain_start) as usize;
                let n = buf.len().min(text.len() - from);
                buf[..n].copy_from_slice(&text[from..from + n]);
                *pos += n as u64;
                Ok(n)
            }
        }
    }
}

impl Seek for Reader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        match &mut self.source {
            Source::Plain(f) => f.seek(to),
            Source::Frames { file, pos, .. } => {
                let target = match to {
                    SeekFrom::Start(n) => Some(n),
                    SeekFrom::End(d) => file.len().checked_add_signed(d),
                    SeekFrom::Current(d) => pos.checked_add_signed(d),
                };
                *pos = target.ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "seek before the history's start",
                    )
                })?;
                Ok(*pos)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::store::HistoryWriter;

    fn frame(text: &str) -> Vec<u8> {
        zstd::bulk::compress(text.as_bytes(), 3).unwrap()
    }

    #[test]
    fn both_shapes_read_as_the_same_plain_text_and_seek_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n";
        std::fs::write(dir.path().join(PLAIN), text).unwrap();
        let mut zst = frame("{\"a\":1}\n");
        zst.extend(frame("{\"b\":2}\n{\"c\":3}\n"));
        let zpath = dir.path().join(WRITTEN);
        std::fs::write(&zpath, &zst).unwrap();
        for path in [dir.path().join(PLAIN), zpath.clone()] {
            let f = HistoryFile::open(&path).unwrap();
            assert_eq!(f.len(), text.len() as u64);
            assert_eq!(read_text(&path).unwrap(), text);
            let mut r = f.reader().unwrap();
            // Into the second frame, then back into the first.
            r.seek(SeekFrom::Start(10)).unwrap();
            let mut s = String::new();
            r.read_to_string(&mut s).unwrap();
            assert_eq!(s, &text[10..]);
            r.seek(SeekFrom::Start(2)).unwrap();
            let mut b = [0u8; 3];
            r.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"a\":");
        }
        assert!(HistoryFile::open(&zpath).unwrap().compressed());
        assert_eq!(in_run(dir.path()), zpath);
    }

    #[test]
    fn frames_of_another_tool_without_their_size_and_cut_mid_line_read_too() {
        // As `zstd` on the command line may write them: streamed (no content size in the
        // header), and cut wherever its blocks fall.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WRITTEN);
        let text = "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n";
        let mut zst = zstd::stream::encode_all(&text.as_bytes()[..11], 3).unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&zst),
            Ok(None)
        ));
        zst.extend(zstd::stream::encode_all(&text.as_bytes()[11..], 3).unwrap());
        std::fs::write(&path, &zst).unwrap();
        assert_eq!(HistoryFile::open(&path).unwrap().len(), text.len() as u64);
        assert_eq!(read_text(&path).unwrap(), text);
    }

    #[test]
    fn a_last_frame_cut_short_is_the_torn_tail_and_damage_elsewhere_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WRITTEN);
        let (a, b) = (frame("{\"a\":1}\n"), frame("{\"b\":2}\n"));
        for cut in 1..b.len() {
            let mut torn = a.clone();
            torn.extend(&b[..cut]);
            std::fs::write(&path, &torn).unwrap();
            assert_eq!(read_text(&path).unwrap(), "{\"a\":1}\n", "cut at {cut}");
        }
        let mut garbage = a.clone();
        garbage.extend(b"not a frame at all");
        garbage.extend(&b);
        std::fs::write(&path, &garbage).unwrap();
        let err = format!("{:#}", HistoryFile::open(&path).err().unwrap());
        assert!(err.contains(&format!("byte {}", a.len())), "{err}");
        assert!(err.contains("damaged"), "{err}");
    }

    #[test]
    fn a_flipped_byte_inside_a_written_frame_fails_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(WRITTEN);
        let mut w = HistoryWriter::create(&path).unwrap();
        for i in 0..200 {
            w.append(crate::history::Event {
                index: 0,
                time: i,
                process: format!("client-{i}"),
                kind: crate::history::EventType::Invoke,
                f: crate::history::F::Write,
                node: None,
                value: serde_json::json!(i),
            })
            .unwrap();
        }
        drop(w);
        let mut bytes = std::fs::read(&path).unwrap();
        // The last frame's last four bytes are its checksum.
        assert!(!HistoryFile::open(&path).unwrap().is_empty());
        let end = bytes.len() - 2;
        bytes[end] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = read_text(&path).map(|_| ()).unwrap_err();
        assert!(format!("{err:#}").contains("damaged"), "{err:#}");
    }
}
