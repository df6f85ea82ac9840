//! Zab's epoch files (`currentEpoch`, `acceptedEpoch` in `dataDir/version-2`) of each server,
//! read where the server runs, without a remote round trip per observation of a serving server.
//!
//! Where the node's folder is on this machine (local clusters) every observation reads the files
//! (a local read costs microseconds). Where it is on a remote host (`--ssh`), a read is an SSH
//! round trip, so for a server that serves, the files are read with one `cat` of both and kept,
//! and read again at once, before the observation is recorded, when the observation shows the
//! server may serve in another epoch than the one kept:
//! - its role or leader changed since its previous observation;
//! - its serving instance may be new: ZooKeeper makes a new `ZooKeeperServer` (whose `uptime`
//!   in `/commands/srvr`, by the JVM's monotonic clock, starts at 0) each time it starts to
//!   lead or follow. One answer places the instance's start within `Start` (the request's
//!   send and the answer's receipt, by this machine's monotonic clock, minus the uptime), so
//!   two answers whose spans do not overlap are two instances: a new election even when the
//!   observer never saw the server stop serving (the same leader re-elected between two
//!   observations). The spans are as wide as the answers were slow, so no latency constant
//!   is tuned to one machine (a JVM under qemu's TCG answers in seconds). The last start seen
//!   is kept across observations whose srvr read failed;
//! - its last zxid is of a later epoch than the kept currentEpoch.
//!
//! ZooKeeper writes the new currentEpoch during sync, before the server serves, and not again
//! while that instance serves: so files read while one serving instance runs hold its epoch.
//! An SSH read takes a while (~0.3 s on a loaded machine), long enough for a paused stale
//! leader to step down and sync to a newer epoch meanwhile, so a read for a serving server is
//! used only when the AdminServer, asked again after the read, still shows the same instance
//! (`same_instance`); otherwise, or when the server's start cannot be told (srvr unanswered),
//! that observation is not recorded as a status but as a failed read, never with a guessed
//! epoch. Otherwise the files are read at most once per `refresh`, the observations in
//! between carrying the kept value.
//!
//! A server that does not serve is never given a kept value: nothing tells whether it served
//! (or synced) since the kept read, since between two observations it may have led a whole
//! epoch this controller never saw. Its files are read at every observation (`fresh`), and
//! `observe::looking_epoch` decides whether that read vouches for the epoch it reports. A read
//! that fails is never replaced by an older value: the observation fails instead.
//!
//! `describe` says which of the two a run used; the run records it in test.json.

use super::observe::Epochs;
use crate::control::Control;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a server's role looked in one observation: serving as (is_leader, leader_id), or not.
pub type Role = Option<(bool, u64)>;

/// When a serving instance started, as one srvr answer tells it: the server computed its
/// uptime somewhere between the request's send and the answer's receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub earliest: Instant,
    pub latest: Instant,
}

impl Start {
    /// From an answer sent at `sent`, received at `received`, saying `uptime_ms` (whole ms,
    /// truncated); None when the uptime reaches back before this process's clock can.
    pub fn from_uptime(sent: Instant, received: Instant, uptime_ms: u64) -> Option<Start> {
        let up = Duration::from_millis(uptime_ms);
        Some(Start {
            earliest: sent.checked_sub(up + Duration::from_millis(1))?,
            latest: received.checked_sub(up)?,
        })
    }

    /// Whether both answers may be of one instance (their spans share an instant).
    pub fn overlaps(&self, other: &Start) -> bool {
        self.earliest <= other.latest && other.earliest <= self.latest
    }
}

/// What one observation saw that tells whether the server may be in a new epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    pub role: Role,
    /// When the serving instance started (from `/commands/srvr` `server_stats.uptime`).
    pub serving_since: Option<Start>,
    /// The epoch of the last zxid the server reported.
    pub zxid_epoch: Option<u64>,
}

/// How often the kept epochs of a remote server are refreshed when nothing changed.
pub const REMOTE_REFRESH: Duration = Duration::from_secs(1);

/// When the epoch files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// At every observation (the files are on this machine).
    EveryObservation,
    /// For a serving server: on a role, leader or instance change, else at most once per
    /// `refresh`; for one that does not serve, at every observation (the files are remote).
    OnChange { refresh: Duration },
}

struct Kept {
    epochs: Epochs,
    read_at: Instant,
    /// The previous observation's.
    seen: Seen,
}

/// Whether the kept epochs may be stale for an observation that saw `now` (see the module doc).
fn new_epoch_possible(kept: &Epochs, before: &Seen, now: &Seen) -> bool {
    if now.role.is_none() {
        // Not serving: it may have served or synced unseen since the kept read.
        return true;
    }
    let new_instance = matches!(
        (before.serving_since, now.serving_since),
        (Some(b), Some(n)) if !b.overlaps(&n)
    );
    let later_zxid = matches!(
        (kept.current, now.zxid_epoch),
        (Some(c), Some(z)) if z > c
    );
    now.role != before.role || new_instance || later_zxid || kept.current.is_none()
}

/// The epoch files of every server, read as `Cadence` says.
pub struct EpochFiles {
    cadence: Cadence,
    kept: Mutex<HashMap<String, Kept>>,
}

impl EpochFiles {
    pub fn new(cadence: Cadence) -> Self {
        EpochFiles {
            cadence,
            kept: Mutex::new(HashMap::new()),
        }
    }

    pub fn cadence(&self) -> Cadence {
        self.cadence
    }

    /// The run's record of how epochs were read (test.json).
    pub fn describe(&self) -> String {
        match self.cadence {
            Cadence::EveryObservation => {
                "read from the node's folder on this machine at every observation".into()
            }
            Cadence::OnChange { refresh } => format!(
                "read on the node's host over SSH (one cat of both files): at every observation of \
                 a server that does not serve; for a serving one when its role, leader or serving \
                 instance (srvr uptime) changed since its previous observation, used only when the \
                 AdminServer still showed that instance after the read, else at most every {} ms, \
                 the observations in between carrying the last value read",
                refresh.as_millis()
            ),
        }
    }

    /// The epochs of `node` for an observation that saw `seen`: the kept ones, else read now
    /// and kept (a serving server over SSH is confirmed by the caller, see the module doc).
    pub fn get(&self, control: &dyn Control, node: &str, seen: Seen) -> Epochs {
        if let Some(e) = self.cached(node, &seen) {
            return e;
        }
        let epochs = self.read(control, node);
        self.keep(node, epochs, seen);
        epochs
    }

    /// The kept epochs when `seen` cannot be in another epoch and they are fresh enough.
    pub fn cached(&self, node: &str, seen: &Seen) -> Option<Epochs> {
        let Cadence::OnChange { refresh } = self.cadence else {
            return None;
        };
        let mut kept = self.kept.lock().unwrap();
        let k = kept.get_mut(node)?;
        let stale = new_epoch_possible(&k.epochs, &k.seen, seen);
        if stale || k.read_at.elapsed() >= refresh {
            return None;
        }
        k.seen = Seen {
            serving_since: seen.serving_since.or(k.seen.serving_since),
            ..*seen
        };
        Some(k.epochs)
    }

    /// Reads the files now: what they hold, `None` for a file that could not be read (never an
    /// older value in its place: a kept epoch stands for no later observation's).
    pub fn read(&self, control: &dyn Control, node: &str) -> Epochs {
        match self.cadence {
            Cadence::EveryObservation => read_local(control, node),
            Cadence::OnChange { .. } => read_remote(control, node),
        }
    }

    /// Keeps `epochs`, read for an observation that saw `seen` (a failed read is not kept).
    pub fn keep(&self, node: &str, epochs: Epochs, seen: Seen) {
        if self.cadence == Cadence::EveryObservation || epochs.current.is_none() {
            return;
        }
        let mut kept = self.kept.lock().unwrap();
        let since = seen
            .serving_since
            .or(kept.get(node).and_then(|k| k.seen.serving_since));
        kept.insert(
            node.to_string(),
            Kept {
                epochs,
                read_at: Instant::now(),
                seen: Seen {
                    serving_since: since,
                    ..seen
                },
            },
        );
    }
}

/// Whether two observations saw one serving instance: the same role, and starts known and
/// possibly the same instant.
pub fn same_instance(a: &Seen, b: &Seen) -> bool {
    a.role == b.role
        && match (a.serving_since, b.serving_since) {
            (Some(x), Some(y)) => x.overlaps(&y),
            _ => false,
        }
}

fn read_local(control: &dyn Control, node: &str) -> Epochs {
    let Ok(dir) = control.node_dir(node) else {
        return Epochs::default();
    };
    let v2 = dir.join("data/version-2");
    Epochs {
        current: super::observe::read_epoch_file(&v2.join("currentEpoch")),
        accepted: super::observe::read_epoch_file(&v2.join("acceptedEpoch")),
    }
}

/// Both files in one round trip: `c=<currentEpoch> a=<acceptedEpoch>` (empty when missing).
fn read_remote(control: &dyn Control, node: &str) -> Epochs {
    let Ok(dir) = control.node_dir(node) else {
        return Epochs::default();
    };
    let v2 = dir.join("data/version-2");
    let script = format!(
        "cd {} 2>/dev/null || exit 0; echo \"c=$(cat currentEpoch 2>/dev/null) a=$(cat acceptedEpoch 2>/dev/null)\"",
        crate::control::backend::ssh::shell::quote(&v2.to_string_lossy())
    );
    match control.exec(node, "sh", &["-c", &script]) {
        Ok(out) => parse_remote(&String::from_utf8_lossy(&out.stdout)),
        Err(e) => {
            tracing::debug!("{node}: cannot read the epoch files: {e:#}");
            Epochs::default()
        }
    }
}

fn parse_remote(text: &str) -> Epochs {
    let field = |k: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Epochs {
        current: field("c="),
        accepted: field("a="),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_answer_parses_and_missing_files_are_none() {
        let e = parse_remote("c=3 a=4\n");
        assert_eq!((e.current, e.accepted), (Some(3), Some(4)));
        let e = parse_remote("c= a=\n");
        assert_eq!((e.current, e.accepted), (None, None));
        let e = parse_remote("");
        assert_eq!((e.current, e.accepted), (None, None));
    }

    /// An answer's start span: the instance started at `at`, the answer took `slow`.
    fn span(at: Instant, slow: Duration) -> Start {
        Start {
            earliest: at - Duration::from_millis(1),
            latest: at + slow,
        }
    }

    fn seen(role: Role, since: Instant, zxid_epoch: u64) -> Seen {
        Seen {
            role,
            serving_since: Some(span(since, Duration::from_millis(20))),
            zxid_epoch: Some(zxid_epoch),
        }
    }

    #[test]
    fn a_start_is_placed_between_the_send_and_the_receipt() {
        let sent = Instant::now() + Duration::from_secs(10);
        let received = sent + Duration::from_millis(700);
        let s = Start::from_uptime(sent, received, 4_000).unwrap();
        assert_eq!(s.earliest, sent - Duration::from_millis(4_001));
        assert_eq!(s.latest, received - Duration::from_millis(4_000));
        // The same instance asked again 3 s later, answered fast: its span overlaps.
        let again = Start::from_uptime(
            sent + Duration::from_secs(3),
            sent + Duration::from_millis(3_010),
            7_005,
        )
        .unwrap();
        assert!(s.overlaps(&again) && again.overlaps(&s));
        // An instance started 1 s after the first answer's receipt: no overlap.
        let new = Start::from_uptime(
            received + Duration::from_secs(2),
            received + Duration::from_secs(2),
            1_000,
        )
        .unwrap();
        assert!(!s.overlaps(&new));
    }

    #[test]
    fn a_new_role_instance_or_epoch_reads_the_files_again() {
        let kept = Epochs {
            current: Some(1),
            accepted: Some(1),
        };
        let leading = Some((true, 2));
        let t0 = Instant::now();
        let before = seen(leading, t0, 1);
        // Same leader, same instance (placed by a slow answer), same epoch: the kept value.
        let slow = Seen {
            serving_since: Some(span(
                t0 - Duration::from_millis(900),
                Duration::from_secs(1),
            )),
            ..before
        };
        assert!(!new_epoch_possible(&kept, &before, &slow));
        // The same leader re-elected between two observations: a later instance.
        let later = t0 + Duration::from_secs(2);
        assert!(new_epoch_possible(&kept, &before, &seen(leading, later, 1)));
        // Following someone else.
        let following = seen(Some((false, 3)), t0, 1);
        assert!(new_epoch_possible(&kept, &before, &following));
        // A zxid of a later epoch than the kept file.
        assert!(new_epoch_possible(&kept, &before, &seen(leading, t0, 2)));
        // Not serving: it may have led or synced unseen since the kept read; read again.
        assert!(new_epoch_possible(&kept, &before, &seen(None, later, 1)));
        assert!(new_epoch_possible(
            &kept,
            &seen(None, t0, 1),
            &seen(None, t0, 1)
        ));
        // Never read yet.
        assert!(new_epoch_possible(&Epochs::default(), &before, &before));
    }

    #[test]
    fn one_instance_is_one_role_started_at_one_time() {
        let t0 = Instant::now();
        let a = seen(Some((true, 2)), t0, 1);
        // Asked again after a read that answered 1.5 s late (a JVM under TCG): still one.
        let slow = Seen {
            serving_since: Some(span(
                t0 - Duration::from_secs(1),
                Duration::from_millis(1_500),
            )),
            ..a
        };
        assert!(same_instance(&a, &slow));
        let later = seen(Some((true, 2)), t0 + Duration::from_millis(200), 1);
        assert!(!same_instance(&a, &later));
        assert!(!same_instance(&a, &seen(Some((false, 3)), t0, 1)));
        let unknown = Seen {
            serving_since: None,
            ..a
        };
        assert!(!same_instance(&a, &unknown));
    }

    #[test]
    fn the_record_names_the_cadence() {
        let remote = EpochFiles::new(Cadence::OnChange {
            refresh: REMOTE_REFRESH,
        });
        assert!(remote.describe().contains("at most every 1000 ms"));
        assert!(EpochFiles::new(Cadence::EveryObservation)
            .describe()
            .contains("every observation"));
    }
}
