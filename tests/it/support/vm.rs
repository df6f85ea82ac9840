//! Throwaway real VMs for the tests that fake VMs (namespaces sharing our kernel and clock) cannot
//! serve, such as stepping a host's system clock: each VM is a qemu guest (TCG: no nested KVM
//! here) running Debian's kernel and an initramfs built for the test, with busybox, Debian's
//! sshd and the libraries fle-node needs. The VMs sit on a bridge `flcqb<suffix>` holding the
//! gateway address of a private 172.x.y.0/24, one tap `flcqt<suffix><i>` each. Everything is
//! removed on drop, also when a test panics: qemu killed by pid, taps, bridge, the subnet claim,
//! the temp dir.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Guest memory. Files live in RAM (the initramfs is the root file system, at most half of it),
/// and fle-node with its line tables is ~60 MB.
pub const MEMORY_MB: u32 = 384;
/// Guest memory with a JVM: the runtime and the jars (~80 MB) live in RAM too, and a ZooKeeper
/// server with its 128 MB heap needs ~250 MB.
pub const JVM_MEMORY_MB: u32 = 768;
/// How long all VMs together may take to boot to a listening sshd.
const BOOT_DEADLINE: Duration = Duration::from_secs(90);
/// Besides busybox: sshd, and for the SSH backend's scripts GNU tar (busybox's lacks
/// --exclude), nohup (no busybox applet) and Debian's /bin/sh, dash (busybox-static's sh runs its
/// own applets before anything in PATH, so GNU tar would never run).
const GUEST_BINARIES: [&str; 4] = [
    "/usr/sbin/sshd",
    "/usr/bin/tar",
    "/usr/bin/nohup",
    "/bin/sh",
];
const PACKAGES: [&str; 4] = [
    "qemu-system-x86",
    "linux-image-amd64",
    "busybox-static",
    "openssh-server",
];

/// What a guest holds besides the SSH backend's tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guest {
    /// A Java runtime (`java` on PATH) and Debian's ZooKeeper jars at Debian's paths, as if
    /// the `zookeeper` package were installed (the guests have no package manager).
    pub zookeeper: bool,
}

pub struct QemuVms {
    pub dir: tempfile::TempDir,
    pub subnet: (u8, u8),
    pub vms: Vec<Vm>,
    pub bridge: Option<String>,
    pub suffix: String,
    claim: Option<PathBuf>,
    /// A key the guests accept, one they do not, and an ssh_config that uses the first with a
    /// known_hosts file holding the guests' real key (strict checking works with it).
    pub client_key: PathBuf,
    pub wrong_key: PathBuf,
    pub ssh_config: PathBuf,
    /// Three guests under TCG fill both cores: one set at a time, beside no heavy cluster.
    _cores: super::exclusive::Held,
}

pub struct Vm {
    pub tap: String,
    pub addr: Ipv4Addr,
    /// The guest's serial console and qemu's own messages.
    pub log: PathBuf,
    qemu: Option<Child>,
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// True when we may boot VMs; otherwise prints why the test is skipped.
pub fn can_run(test: &str) -> bool {
    if !fle_chaos::control::is_root() {
        super::skip::skip(test, "needs root (bridge, taps, qemu)");
        return false;
    }
    ensure_packages();
    true
}

fn have_everything() -> bool {
    ["/usr/bin/qemu-system-x86_64", "/bin/busybox"]
        .iter()
        .chain(&GUEST_BINARIES)
        .all(|p| Path::new(p).exists())
        && kernel().is_some()
}

/// Installs what the VMs are made of with apt-get when anything is missing.
fn ensure_packages() {
    if have_everything() {
        return;
    }
    // The controller's installer: one apt-get at a time in this process (dpkg has one lock).
    let installed =
        fle_chaos::control::backend::apt::install(&PACKAGES, "the VM tests", &mut |s| {
            eprintln!("{s}")
        });
    assert!(
        have_everything(),
        "the VM tests need {p}, which could not be installed ({}); run `apt-get install -y {p}`",
        installed.last_line,
        p = PACKAGES.join(" ")
    );
}

/// The guest's network card, and the kernel modules (with their dependencies) it needs.
const NIC: &str = "virtio-net-pci";
const NIC_MODULES: [&str; 2] = ["virtio_pci", "virtio_net"];

/// The .ko files of `names` and of their dependencies, in an order insmod accepts (modprobe's:
/// modules.dep lists a module's dependencies so that they load last to first).
fn modules(version: &str, names: &[&str]) -> Option<Vec<PathBuf>> {
    let root = PathBuf::from(format!("/usr/lib/modules/{version}"));
    let deps = std::fs::read_to_string(root.join("modules.dep")).ok()?;
    let mut out: Vec<PathBuf> = Vec::new();
    for name in names {
        let line = deps.lines().find(|l| {
            let module = l.split(':').next().unwrap();
            module.rsplit('/').next() == Some(&format!("{name}.ko"))
        })?;
        let (module, needs) = line.split_once(':')?;
        for m in needs.split_whitespace().rev().chain([module]) {
            let path = root.join(m);
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    Some(out)
}

/// The newest /boot/vmlinuz-<version> with the NIC's modules installed (uncompressed: busybox's
/// insmod cannot unpack them): (kernel, modules).
fn kernel() -> Option<(PathBuf, Vec<PathBuf>)> {
    let key = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    std::fs::read_dir("/boot")
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let version = name.strip_prefix("vmlinuz-")?.to_string();
            let modules = modules(&version, &NIC_MODULES)?;
            Some((version, modules))
        })
        .max_by_key(|(v, _)| key(v))
        .map(|(v, m)| (PathBuf::from(format!("/boot/vmlinuz-{v}")), m))
}

/// `bz` (a bzImage) decompressed once into target/tmp, an ELF that qemu boots directly (PVH):
/// TCG would otherwise spend ~4 s of every boot in the kernel's own decompressor. `bz` itself
/// when the kernel cannot boot that way or its payload is in a format we do not know.
fn uncompressed_kernel(bz: &Path) -> PathBuf {
    let version = bz
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("vmlinuz-");
    let config = std::fs::read_to_string(format!("/boot/config-{version}")).unwrap_or_default();
    if !config.lines().any(|l| l == "CONFIG_PVH=y") {
        return bz.to_path_buf();
    }
    let data = std::fs::read(bz).unwrap();
    let mtime = std::fs::metadata(bz).unwrap().modified().unwrap();
    let stamp = mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let cached = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("flcq-vmlinux-{version}-{}-{stamp}", data.len()));
    if cached.exists() {
        return cached;
    }
    // The x86 boot header says where the compressed kernel is; it ends with its size (4 bytes).
    let le32 = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    let setup_sects = match data[0x1f1] {
        0 => 4,
        n => n as usize,
    };
    let start = (setup_sects + 1) * 512 + le32(0x248);
    let Some(payload) = data.get(start..(start + le32(0x24c)).saturating_sub(4)) else {
        return bz.to_path_buf();
    };
    let tool = match payload {
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => "xz",
        [0x1f, 0x8b, ..] => "gzip",
        [0x28, 0xb5, 0x2f, 0xfd, ..] => "zstd",
        _ => return bz.to_path_buf(),
    };
    let mut child = Command::new(tool)
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let out = std::thread::scope(|s| {
        s.spawn(move || std::io::Write::write_all(&mut stdin, payload));
        child.wait_with_output().unwrap()
    });
    if !out.status.success() || !out.stdout.starts_with(b"\x7fELF") {
        return bz.to_path_buf();
    }
    // Through a private name: another test process may be writing the same cache.
    let tmp = cached.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &out.stdout).unwrap();
    std::fs::rename(&tmp, &cached).unwrap();
    cached
}

/// An initramfs in the kernel's "newc" cpio format, uncompressed (the kernel takes it as is;
/// gunzipping would cost TCG time at every boot). Paths are absolute; parents are added.
#[derive(Default)]
struct Initramfs {
    entries: BTreeMap<String, Entry>,
}

struct Entry {
    mode: u32,
    /// A file's contents, a symlink's target.
    data: Vec<u8>,
    /// A device node's major and minor.
    dev: (u32, u32),
}

impl Initramfs {
    fn add(&mut self, path: &str, mode: u32, data: Vec<u8>, dev: (u32, u32)) {
        let mut parent = Path::new(path).parent();
        while let Some(p) = parent.filter(|p| *p != Path::new("/")) {
            self.entries
                .entry(p.to_str().unwrap().to_string())
                .or_insert(Entry {
                    mode: 0o040755,
                    data: Vec::new(),
                    dev: (0, 0),
                });
            parent = p.parent();
        }
        let entry = Entry { mode, data, dev };
        self.entries.insert(path.to_string(), entry);
    }

    fn dir(&mut self, path: &str, perm: u32) {
        self.add(path, 0o040000 | perm, Vec::new(), (0, 0));
    }

    fn file(&mut self, path: &str, perm: u32, data: impl Into<Vec<u8>>) {
        self.add(path, 0o100000 | perm, data.into(), (0, 0));
    }

    fn symlink(&mut self, path: &str, target: &str) {
        self.add(path, 0o120777, target.into(), (0, 0));
    }

    /// A host file (symlinks followed) at the same path, its directory resolved so that it
    /// lands in the guest's merged /usr like on the host.
    fn host_file(&mut self, path: &str) {
        let p = Path::new(path);
        let dir = std::fs::canonicalize(p.parent().unwrap()).unwrap();
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        self.file(
            dir.join(p.file_name().unwrap()).to_str().unwrap(),
            mode,
            data,
        );
    }

    /// `binary` with every shared library (and the ELF interpreter) ldd lists for it.
    fn binary_and_libraries(&mut self, binary: &str, with_binary: bool) {
        if with_binary {
            self.host_file(binary);
        }
        let out = Command::new("ldd").arg(binary).output().unwrap();
        for lib in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|w| w.starts_with('/'))
        {
            self.host_file(lib);
        }
    }

    fn write(&self, path: &Path) {
        let mut out = Vec::new();
        let mut entry = |ino: usize, name: &str, e: &Entry| {
            let fields = [
                ino as u32,
                e.mode,
                0, // uid
                0, // gid
                1, // nlink
                0, // mtime
                e.data.len() as u32,
                0, // device of the file system: none
                0,
                e.dev.0,
                e.dev.1,
                name.len() as u32 + 1,
                0, // checksum (unused by newc)
            ];
            out.extend_from_slice(b"070701");
            for f in fields {
                out.extend_from_slice(format!("{f:08x}").as_bytes());
            }
            out.extend_from_slice(name.as_bytes());
            out.push(0);
            out.resize(out.len().next_multiple_of(4), 0);
            out.extend_from_slice(&e.data);
            out.resize(out.len().next_multiple_of(4), 0);
        };
        for (i, (path, e)) in self.entries.iter().enumerate() {
            entry(i + 1, path.trim_start_matches('/'), e);
        }
        let end = Entry {
            mode: 0,
            data: Vec::new(),
            dev: (0, 0),
        };
        entry(0, "TRAILER!!!", &end);
        std::fs::write(path, out).unwrap();
    }
}

/// The guest's init: mounts, the NIC driver, the address from the kernel command line, then
/// sshd as pid 1 (it reaps orphans; if anything fails, init exits, the kernel panics and qemu
/// quits at once, which create() reports with the serial log).
const INIT: &str = r#"#!/bin/busybox sh
set -e
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
for w in $(cat /proc/cmdline); do
  case $w in
    flc.addr=*) addr=${w#*=} ;;
    flc.gw=*) gw=${w#*=} ;;
    flc.name=*) hostname "${w#*=}" ;;
  esac
done
# The JVM resolves its own host name (InetAddress.getLocalHost).
echo "$addr $(hostname)" >> /etc/hosts
for m in /modules/*.ko; do insmod "$m"; done
ip link set lo up
ip addr add "$addr/24" dev eth0
ip link set eth0 up
ip route add default via "$gw"
echo "ListenAddress $addr" >> /etc/ssh/sshd_config
echo "flc-vm: $addr up, starting sshd"
exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
"#;

const SSHD_CONFIG: &str = "Port 22\nHostKey /etc/ssh/ssh_host_ed25519_key\nPidFile none\n\
    AuthorizedKeysFile /etc/ssh/authorized_keys\nStrictModes no\nUsePAM no\n\
    PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
    PermitRootLogin prohibit-password\nMaxSessions 64\nMaxStartups 64\nLogLevel ERROR\n";

/// Debian's ZooKeeper jars: zookeeper.jar and what its manifest's Class-Path names, transitively,
/// plus the two it omits (slf4j-simple to log, servlet-api for the AdminServer), as paths under
/// /usr/share/java (symlinks kept as they are named, so Class-Path entries resolve).
pub fn zookeeper_jars() -> Vec<PathBuf> {
    let dir = Path::new("/usr/share/java");
    let mut todo: Vec<String> = ["zookeeper.jar", "slf4j-simple.jar", "servlet-api.jar"]
        .map(String::from)
        .to_vec();
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some(name) = todo.pop() {
        let path = dir.join(&name);
        if seen.contains(&path) || !path.exists() {
            continue;
        }
        let class_path = fle_chaos::control::sut::zookeeper::jar::class_path(&path)
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        todo.extend(class_path);
        seen.push(path);
    }
    seen
}

/// A small Java runtime for the guests (jlink: the modules ZooKeeper and its Jetty use, no debug
/// info, with a class-data-sharing archive so the JVM starts faster), built once into
/// target/tmp (~30 s) and kept: (its folder, which is also its path inside the guests).
fn guest_jre() -> PathBuf {
    let version = Command::new("java")
        .arg("-version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    let tag: String = version
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flcq-jre-{tag}"));
    if dir.join("bin/java").exists() && dir.join("lib/server/classes.jsa").exists() {
        return dir;
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ok = Command::new("jlink")
        .args([
            "--add-modules",
            "java.base,java.management,java.naming,java.xml,java.security.sasl,\
             java.security.jgss,jdk.management,jdk.unsupported,java.sql",
            "--strip-debug",
            "--no-header-files",
            "--no-man-pages",
            "--output",
        ])
        .arg(&tmp)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "jlink failed (the ZooKeeper VM tests need a JDK: apt-get install -y default-jdk-headless)"
    );
    let ok = Command::new(tmp.join("bin/java"))
        .arg("-Xshare:dump")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "cannot dump the class-data-sharing archive of {}",
        tmp.display()
    );
    // Another test process may have built it meanwhile: theirs is as good.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}

/// Adds every file of the host folder `dir` at the same path.
fn add_tree(fs: &mut Initramfs, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            add_tree(fs, &path);
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            fs.symlink(path.to_str().unwrap(), target.to_str().unwrap());
        } else {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o7777;
            fs.file(path.to_str().unwrap(), mode, std::fs::read(&path).unwrap());
        }
    }
}

/// The guests' initramfs: busybox, sshd, the libraries of fle-node, the keys. Built per set in
/// ~0.2 s; one for all VMs of the set, so they share one host key (each reads its address from
/// the kernel command line).
fn build_initramfs(
    path: &Path,
    modules: &[PathBuf],
    host_key: &Path,
    authorized: &Path,
    guest: Guest,
) {
    let mut fs = Initramfs::default();
    // Merged /usr as on the host, so ldd's paths and the binaries' own paths both resolve.
    for d in ["bin", "sbin", "lib", "lib64"] {
        fs.symlink(&format!("/{d}"), &format!("usr/{d}"));
    }
    fs.host_file("/bin/busybox");
    fs.binary_and_libraries("/bin/busybox", false);
    for b in GUEST_BINARIES {
        fs.binary_and_libraries(b, true);
    }
    // The SSH backend uploads fle-node into the guest; only its libraries must be there.
    fs.binary_and_libraries(
        &fle_chaos::control::sut::fle_node::built_binary().to_string_lossy(),
        false,
    );
    if guest.zookeeper {
        let jre = guest_jre();
        add_tree(&mut fs, &jre);
        fs.binary_and_libraries(jre.join("bin/java").to_str().unwrap(), false);
        // The runtime's own libraries find each other by $ORIGIN; the system ones must be there.
        let mut libs = vec![jre.join("lib/server/libjvm.so")];
        libs.extend(
            std::fs::read_dir(jre.join("lib"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "so")),
        );
        for lib in libs {
            fs.binary_and_libraries(lib.to_str().unwrap(), false);
        }
        fs.symlink("/usr/bin/java", jre.join("bin/java").to_str().unwrap());
        for jar in zookeeper_jars() {
            let target = std::fs::canonicalize(&jar).unwrap();
            let data = std::fs::read(&target).unwrap();
            fs.file(jar.to_str().unwrap(), 0o644, data);
        }
    }
    fs.file("/init", 0o755, INIT);
    for (i, m) in modules.iter().enumerate() {
        let name = m.file_name().unwrap().to_str().unwrap();
        let data = std::fs::read(m).unwrap();
        fs.file(&format!("/modules/{i:02}-{name}"), 0o644, data);
    }
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    fs.add("/dev/console", 0o020600, Vec::new(), (5, 1));
    for (d, perm) in [("/proc", 0o555), ("/sys", 0o555), ("/tmp", 0o1777)] {
        fs.dir(d, perm);
    }
    for d in ["/run/sshd", "/var/empty", "/usr/local/bin"] {
        fs.dir(d, 0o755);
    }
    fs.dir("/root", 0o700);
    fs.file(
        "/etc/passwd",
        0o644,
        "root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n",
    );
    fs.file("/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n");
    fs.file(
        "/etc/shadow",
        0o600,
        "root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n",
    );
    fs.file(
        "/etc/nsswitch.conf",
        0o644,
        "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
    );
    fs.file("/etc/hosts", 0o644, "127.0.0.1 localhost\n");
    fs.file("/etc/ssh/sshd_config", 0o644, SSHD_CONFIG);
    fs.file(
        "/etc/ssh/ssh_host_ed25519_key",
        0o600,
        std::fs::read(host_key).unwrap(),
    );
    fs.file(
        "/etc/ssh/authorized_keys",
        0o644,
        std::fs::read(authorized).unwrap(),
    );
    fs.write(path);
}

impl QemuVms {
    /// `n` VMs booted at once, each with sshd listening on port 22 of its own address.
    pub fn create(n: usize) -> QemuVms {
        QemuVms::create_with(n, Guest::default())
    }

    /// `n` VMs holding what `guest` asks for besides the SSH backend's tools.
    pub fn create_with(n: usize, guest: Guest) -> QemuVms {
        let cores = super::exclusive::hold(super::exclusive::Exclusive::HeavyCluster);
        let dir = tempfile::Builder::new()
            .prefix("flc-vm-")
            .tempdir()
            .unwrap();
        let suffix = format!("{:05x}", rand::random::<u32>() & 0xfffff);
        let client_key = dir.path().join("client_key");
        let wrong_key = dir.path().join("wrong_key");
        let ssh_config = dir.path().join("ssh_config");
        let mut vms = QemuVms {
            dir,
            subnet: (0, 0),
            vms: Vec::new(),
            bridge: None,
            suffix,
            claim: None,
            client_key,
            wrong_key,
            ssh_config,
            _cores: cores,
        };
        // From here on, whatever exists is in `vms`, so a panic's drop removes it.
        let (subnet, claim) = super::fixture::claim_subnet();
        vms.subnet = subnet;
        vms.claim = Some(claim);
        let d = vms.dir.path().to_path_buf();
        super::fixture::keygen(&vms.client_key);
        super::fixture::keygen(&vms.wrong_key);
        let host_key = d.join("host_key");
        super::fixture::keygen(&host_key);
        let (kernel, modules) = kernel().expect("no /boot/vmlinuz-* with its NIC modules");
        let kernel = uncompressed_kernel(&kernel);
        let initramfs = d.join("initramfs.cpio");
        build_initramfs(
            &initramfs,
            &modules,
            &host_key,
            &vms.client_key.with_extension("pub"),
            guest,
        );
        let memory = if guest.zookeeper {
            JVM_MEMORY_MB
        } else {
            MEMORY_MB
        };

        let bridge = format!("flcqb{}", vms.suffix);
        vms.bridge = Some(bridge.clone());
        run("ip", &["link", "add", &bridge, "type", "bridge"]);
        let gateway = format!("{}/24", vms.gateway());
        run("ip", &["addr", "add", &gateway, "dev", &bridge]);
        run("ip", &["link", "set", &bridge, "up"]);
        let accel = std::env::var("FLC_TEST_QEMU_ACCEL").unwrap_or_else(|_| "tcg".into());
        let pubkey = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let pubkey: Vec<&str> = pubkey.split_whitespace().take(2).collect();
        let mut known_hosts = String::new();
        for i in 0..n {
            let addr = vms.addr(i);
            let tap = format!("flcqt{}{}", vms.suffix, i + 1);
            let log = d.join(format!("serial_{}.log", i + 1));
            vms.vms.push(Vm {
                tap: tap.clone(),
                addr,
                log: log.clone(),
                qemu: None,
            });
            run("ip", &["tuntap", "add", "dev", &tap, "mode", "tap"]);
            run("ip", &["link", "set", &tap, "master", &bridge, "up"]);
            known_hosts.push_str(&format!("{addr} {}\n", pubkey.join(" ")));
            // Guests share a bridge: each needs its own MAC (qemu's default is one for all). No
            // boot ROM: iPXE would wait for a key press.
            let mac = format!("52:54:00:{:02x}:{:02x}:{:02x}", subnet.0, subnet.1, 11 + i);
            // no_timer_check: on a loaded host the emulated timer misses the kernel's IO-APIC
            // timer check, which then panics ("IO-APIC + timer doesn't work!", seen 2026-11-30
            // under load 16 on 2 cores).
            let append = format!(
                "console=ttyS0 quiet panic=-1 no_timer_check flc.addr={addr} flc.gw={} flc.name=flcq{}{}",
                vms.gateway(),
                vms.suffix,
                i + 1
            );
            let out = std::fs::File::create(&log).unwrap();
            let child = Command::new("qemu-system-x86_64")
                .args(["-accel", &accel, "-cpu", "max", "-m", &memory.to_string()])
                .args(["-nographic", "-no-reboot", "-rtc", "base=utc"])
                .arg("-kernel")
                .arg(&kernel)
                .arg("-initrd")
                .arg(&initramfs)
                .args(["-append", &append])
                .arg("-netdev")
                .arg(format!("tap,id=n0,ifname={tap},script=no,downscript=no"))
                .args(["-device", &format!("{NIC},netdev=n0,mac={mac},romfile=")])
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("cannot start qemu-system-x86_64");
            vms.vms[i].qemu = Some(child);
        }
        super::fixture::write_ssh_config(&vms.ssh_config, &d, &vms.client_key, &known_hosts);
        let deadline = Instant::now() + BOOT_DEADLINE;
        for i in 0..n {
            vms.wait_for_sshd(i, deadline);
        }
        vms
    }

    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(172, self.subnet.0, self.subnet.1, 1)
    }

    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(172, self.subnet.0, self.subnet.1, 11 + i as u8)
    }

    pub fn hosts(&self) -> Vec<String> {
        self.vms.iter().map(|v| v.addr.to_string()).collect()
    }

    /// `cmd` run in VM `i` through the system ssh client with the test's config; its stdout,
    /// trimmed. Panics with the VM's serial log when it fails.
    pub fn ssh(&self, i: usize, cmd: &str, stdin: &[u8]) -> String {
        use std::io::Write;
        let mut child = Command::new("ssh")
            .arg("-F")
            .arg(&self.ssh_config)
            .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=20"])
            .arg(format!("root@{}", self.addr(i)))
            .arg(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "`{cmd}` in vm {} failed: {}\nserial log:\n{}",
            i + 1,
            String::from_utf8_lossy(&out.stderr),
            self.serial_log(i)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// What VM `i` printed on its serial console so far (with qemu's own errors).
    pub fn serial_log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.vms[i].log).unwrap_or_default()
    }

    fn wait_for_sshd(&mut self, i: usize, deadline: Instant) {
        let addr = SocketAddr::from((self.vms[i].addr, 22));
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                return;
            }
            if let Some(child) = self.vms[i].qemu.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "qemu of vm {} exited ({status}); serial log:\n{}",
                        i + 1,
                        self.serial_log(i)
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "sshd on {addr} never listened within {BOOT_DEADLINE:?}; serial log:\n{}",
                self.serial_log(i)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for QemuVms {
    fn drop(&mut self) {
        for vm in &mut self.vms {
            if let Some(mut child) = vm.qemu.take() {
                // By pid: the Child owns exactly the qemu we started.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for vm in &self.vms {
            if Path::new("/sys/class/net").join(&vm.tap).exists() {
                let _ = Command::new("ip")
                    .args(["link", "delete", &vm.tap])
                    .status();
            }
        }
        if let Some(bridge) = &self.bridge {
            let _ = Command::new("ip").args(["link", "delete", bridge]).status();
        }
        if let Some(claim) = &self.claim {
            let _ = std::fs::remove_file(claim);
        }
    }
}
