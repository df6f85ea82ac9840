//! The FUSE filesystem: every call passes through to a backing directory, except file data
//! written and not yet fsynced, which stays in the [`Overlay`] until `fsync` (or a truncate)
//! writes it out, or a power loss forgets it.
//!
//! Namespace changes (create, mkdir, rename, unlink) go to the backing directory at once: the
//! fault this models is lost *data*, as in ZOOKEEPER-3911 (an ACK before the fsync), not a lost
//! directory entry. Files are opened `direct_io` and attributes are never cached, so after a power
//! loss the kernel cannot serve bytes this filesystem has forgotten.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::overlay::Overlay;

/// Attributes and entries are never cached by the kernel: sizes change under it at a power loss.
const TTL: Duration = Duration::ZERO;

/// Inode numbers ↔ paths relative to the backing directory ("" is the root).
#[derive(Default)]
struct Inodes {
    paths: HashMap<u64, PathBuf>,
    inos: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    fn ino_of(&mut self, rel: &Path) -> u64 {
        if let Some(i) = self.inos.get(rel) {
            return *i;
        }
        self.next += 1;
        let i = self.next;
        self.paths.insert(i, rel.to_path_buf());
        self.inos.insert(rel.to_path_buf(), i);
        i
    }

    fn remove(&mut self, rel: &Path) -> Option<u64> {
        let i = self.inos.remove(rel)?;
        self.paths.remove(&i);
        Some(i)
    }

    /// A rename moves the entry and everything under it.
    fn rename(&mut self, from: &Path, to: &Path) {
        let moved: Vec<(PathBuf, u64)> = self
            .inos
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (p, i) in moved {
            let np = to.join(p.strip_prefix(from).unwrap_or(Path::new("")));
            let np = if p == from { to.to_path_buf() } else { np };
            self.inos.remove(&p);
            self.inos.insert(np.clone(), i);
            self.paths.insert(i, np);
        }
    }
}

/// What the filesystem and its control socket share.
pub struct State {
    pub backing: PathBuf,
    inodes: Inodes,
    pub overlay: Overlay,
}

impl State {
    pub fn new(backing: PathBuf) -> State {
        let mut inodes = Inodes {
            next: 1,
            ..Inodes::default()
        };
        inodes.paths.insert(1, PathBuf::new());
        inodes.inos.insert(PathBuf::new(), 1);
        State {
            backing,
            inodes,
            overlay: Overlay::default(),
        }
    }

    /// The backing path of an inode.
    pub fn path(&self, ino: u64) -> Result<PathBuf, Errno> {
        let rel = self.inodes.paths.get(&ino).ok_or(Errno::ENOENT)?;
        Ok(self.backing.join(rel))
    }

    /// The path relative to the mount (for reports).
    pub fn rel(&self, ino: u64) -> String {
        self.inodes
            .paths
            .get(&ino)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("<inode {ino}>"))
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        let rel = self.inodes.paths.get(&parent).ok_or(Errno::ENOENT)?;
        Ok(rel.join(name))
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let md = fs::symlink_metadata(self.path(ino)?).map_err(Errno::from)?;
        let mut size = md.len();
        if let Some(p) = self.overlay.get(ino) {
            size = p.size;
        }
        let kind = if md.is_dir() {
            FileType::Directory
        } else if md.file_type().is_symlink() {
            FileType::Symlink
        } else {
            FileType::RegularFile
        };
        let t = |s: i64, ns: i64| UNIX_EPOCH + Duration::new(s.max(0) as u64, ns as u32);
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: t(md.atime(), md.atime_nsec()),
            mtime: t(md.mtime(), md.mtime_nsec()),
            ctime: t(md.ctime(), md.ctime_nsec()),
            crtime: SystemTime::UNIX_EPOCH,
            kind,
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn entry(&mut self, rel: &Path) -> Result<FileAttr, Errno> {
        let ino = self.inodes.ino_of(rel);
        self.attr(ino)
    }

    /// Writes the pending data of `ino` to the backing file and fsyncs it.
    pub fn make_durable(&mut self, ino: u64) -> io::Result<()> {
        let Some(p) = self.overlay.take(ino) else {
            return Ok(());
        };
        let path = self
            .path(ino)
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        let f = OpenOptions::new().write(true).open(path)?;
        for (off, data) in &p.writes {
            f.write_all_at(data, *off)?;
        }
        f.sync_data()
    }

    /// Reads `size` bytes at `offset` as a reader of the mount sees them.
    fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let f = File::open(self.path(ino)?).map_err(Errno::from)?;
        let backing_len = f.metadata().map_err(Errno::from)?.len();
        let logical = self.overlay.get(ino).map_or(backing_len, |p| p.size);
        let end = logical.min(offset + u64::from(size));
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        let from_disk = backing_len.min(end).saturating_sub(offset) as usize;
        f.read_exact_at(&mut buf[..from_disk], offset)
            .map_err(Errno::from)?;
        if let Some(p) = self.overlay.get(ino) {
            p.overlay(offset, &mut buf);
        }
        Ok(buf)
    }
}

/// The filesystem handed to fuser; the state is shared with the control socket.
pub struct LazyFs {
    pub state: Arc<Mutex<State>>,
}

impl LazyFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state for a test filesystem.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        match s.child(parent.0, name).and_then(|rel| s.entry(&rel)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.lock();
        let r = (|| -> Result<FileAttr, Errno> {
            let path = s.path(ino.0)?;
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(errno)?;
            }
            if let Some(size) = size {
                // A truncate is applied to the backing file; the writes before it are made
                // durable first so the two never disagree (a simplification: real disks may
                // lose either; callers of set_len here fsync right after anyway).
                s.make_durable(ino.0).map_err(errno)?;
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(size))
                    .map_err(errno)?;
            }
            s.attr(ino.0)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let mut s = self.lock();
        let r = s.child(parent.0, name).and_then(|rel| {
            fs::DirBuilder::new()
                .mode(mode & 0o7777)
                .create(s.backing.join(&rel))
                .map_err(errno)?;
            s.entry(&rel)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = s.child(parent.0, name).and_then(|rel| {
            fs::remove_file(s.backing.join(&rel)).map_err(errno)?;
            if let Some(i) = s.inodes.remove(&rel) {
                s.overlay.forget(i);
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = s.child(parent.0, name).and_then(|rel| {
            fs::remove_dir(s.backing.join(&rel)).map_err(errno)?;
            s.inodes.remove(&rel);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let r = (|| -> Result<(), Errno> {
            let from = s.child(parent.0, name)?;
            let to = s.child(newparent.0, newname)?;
            fs::rename(s.backing.join(&from), s.backing.join(&to)).map_err(errno)?;
            // The file renamed over is gone, with whatever it had pending.
            if let Some(i) = s.inodes.remove(&to) {
                s.overlay.forget(i);
            }
            s.inodes.rename(&from, &to);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().path(ino.0) {
            // direct_io: no page cache that could outlive a power loss.
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.lock().read(ino.0, offset, size) {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        let r = s
            .path(ino.0)
            .and_then(|p| fs::metadata(p).map_err(errno))
            .map(|md| s.overlay.write(ino.0, md.len(), offset, data));
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() is not a durability point.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.lock().make_durable(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut s = self.lock();
        let r = (|| -> Result<Vec<(u64, FileType, std::ffi::OsString)>, Errno> {
            let dir = s.path(ino.0)?;
            let rel = s.inodes.paths.get(&ino.0).cloned().unwrap_or_default();
            let mut out = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ino.0, FileType::Directory, "..".into()),
            ];
            let mut names: Vec<_> = fs::read_dir(dir)
                .map_err(errno)?
                .filter_map(Result::ok)
                .collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let kind = match e.file_type() {
                    Ok(t) if t.is_dir() => FileType::Directory,
                    Ok(t) if t.is_symlink() => FileType::Symlink,
                    _ => FileType::RegularFile,
                };
                let i = s.inodes.ino_of(&rel.join(e.file_name()));
                out.push((i, kind, e.file_name()));
            }
            Ok(out)
        })();
        match r {
            Ok(entries) => {
                for (n, (i, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(i), (n + 1) as u64, kind, &name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self
            .lock()
            .path(ino.0)
            .and_then(|p| File::open(p).and_then(|d| d.sync_all()).map_err(errno));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let backing = self.lock().backing.clone();
        match nix::sys::statvfs::statvfs(&backing) {
            Ok(v) => reply.statfs(
                v.blocks(),
                v.blocks_free(),
                v.blocks_available(),
                v.files(),
                v.files_free(),
                v.block_size() as u32,
                v.name_max() as u32,
                v.fragment_size() as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e as i32)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.lock();
        let r = s.child(parent.0, name).and_then(|rel| {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(flags & libc::O_TRUNC != 0)
                .custom_flags(flags & libc::O_EXCL)
                .mode(mode & 0o7777)
                .open(s.backing.join(&rel))
                .map_err(errno)?;
            s.entry(&rel)
        });
        match r {
            Ok(a) => reply.created(
                &TTL,
                &a,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }
}
