//! The follower's async shell: dials the leader's quorum port from my own address, runs
//! [`Follower`] and returns when following ends (leader silent, connection closed, protocol
//! error); the caller goes back to LOOKING.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use crate::api::ZabPhase;
use crate::bugs::Bug;
use crate::zab::batch::Batch;
use crate::zab::conn::{spawn_conn, ConnEvent};
use crate::zab::exec::{execute, fsync};
use crate::zab::follower::Follower;
use crate::zab::store::{lock, SharedStore};
use crate::zab::{publish, reconfigured, ZabConfig, ZabProgress, DIAL_RETRY};

/// Follows `leader_sid` until that ends; `Ok` carries why, `Err` a local failure (disk).
pub async fn follow(
    cfg: ZabConfig,
    leader_sid: u64,
    store: SharedStore,
    progress: watch::Sender<ZabProgress>,
) -> anyhow::Result<String> {
    let my_addr = cfg.my_addr()?;
    let Some(&leader_addr) = cfg.servers.get(&leader_sid) else {
        anyhow::bail!("leader {leader_sid} is not in the server list");
    };
    publish(&progress, &store, ZabPhase::Discovery, None);
    let stream = match connect(my_addr, leader_addr, cfg.tick * cfg.init_limit).await {
        Ok(s) => s,
        Err(why) => {
            publish(&progress, &store, ZabPhase::Election, None);
            return Ok(format!(
                "could not reach leader {leader_sid} at {leader_addr}: {why}"
            ));
        }
    };
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let conn = spawn_conn(stream, Vec::new(), 0, ev_tx);
    let mut sm = {
        let s = lock(&store);
        Follower::new(
            cfg.follower_config(leader_sid),
            s.accepted_epoch(),
            s.current_epoch(),
            s.last_logged_zxid(),
            s.last_committed_zxid(),
        )
    };
    let mut beat = tokio::time::interval(cfg.silence_check());
    // Burst: beats missed while the runtime was busy are counted at once, so silence is
    // measured in real time, not in timer wake-ups (a loaded host delayed the give-up).
    beat.set_missed_tick_behavior(MissedTickBehavior::Burst);
    beat.tick().await;
    let mut outputs = sm.start();
    // Only the seeded ack-before-fsync / epoch-before-txns bugs fill it.
    let mut batch = Batch::new(cfg.tick * cfg.init_limit);
    // Only the seeded wall-clock-timeouts bug reads it.
    let mut heard_at_wall = SystemTime::now();
    let ended = loop {
        let mut end = None;
        let mut send = |_: u64, m| {
            let _ = conn.tx.send(m);
        };
        let ex = execute(&store, std::mem::take(&mut outputs), &mut send).await?;
        if ex.synced {
            batch.flushed();
        }
        if ex.batched {
            batch.add(ex.appended.max(1), Instant::now());
        }
        if batch.due(Instant::now()) {
            fsync(&store).await?;
            batch.flushed();
        }
        // A reconfig committed here (by COMMIT, INFORM or the sync) ends the role too.
        if let Some(why) = ex.step_down.or_else(|| reconfigured(&store, &cfg)) {
            end = Some(why);
        }
        publish(&progress, &store, sm.phase(), sm.synced_by());
        if let Some(why) = end {
            break why;
        }
        tokio::select! {
            ev = ev_rx.recv() => {
                let mut ev = ev;
                while let Some(e) = ev {
                    match e {
                        ConnEvent::Frame(_, m) => {
                            if let Some(why) = wall_clock_silence(&cfg, leader_sid, heard_at_wall) {
                                end = Some(why);
                                break;
                            }
                            heard_at_wall = SystemTime::now();
                            outputs.extend(sm.step(m))
                        }
                        ConnEvent::Closed(_, why) => {
                            end = Some(format!("connection to leader {leader_sid} ended: {why}"));
                            break;
                        }
                    }
                    ev = ev_rx.try_recv().ok();
                }
            }
            _ = beat.tick() => {
                outputs.extend(sm.tick());
                end = wall_clock_silence(&cfg, leader_sid, heard_at_wall);
            }
        }
        if let Some(why) = end {
            // Persist what arrived before the close (e.g. a COMMIT), then stop.
            let ex = execute(&store, std::mem::take(&mut outputs), &mut |_, _| {}).await?;
            if ex.batched {
                batch.add(ex.appended.max(1), Instant::now());
            }
            break why;
        }
    };
    if !batch.is_empty() {
        // The role's last batch is flushed as it ends (as ZooKeeper's is on shutdown).
        fsync(&store).await?;
    }
    drop(conn);
    publish(&progress, &store, ZabPhase::Election, sm.synced_by());
    // The server logs why the role ended (rate-limited while following keeps failing).
    tracing::debug!("stopped following {leader_sid}: {ended}");
    Ok(ended)
}

/// Only under the seeded `wall-clock-timeouts` bug: the leader's silence since `heard_at`,
/// timed on the wall clock (ZOOKEEPER-1366), so a clock step forward looks like a silent
/// leader (and a step back hides one). Checked on every beat and every message.
fn wall_clock_silence(cfg: &ZabConfig, leader: u64, heard_at: SystemTime) -> Option<String> {
    if !cfg.bugs.has(Bug::WallClockTimeouts) {
        return None;
    }
    let limit = cfg.tick * cfg.sync_limit;
    let silent = SystemTime::now()
        .duration_since(heard_at)
        .unwrap_or_default();
    (silent > limit).then(|| {
        format!("leader {leader} silent for {silent:?} by the wall clock (limit {limit:?})")
    })
}

/// Dials `to` from `from`'s IP, retrying until `within` (the leader may not listen yet).
async fn connect(from: SocketAddr, to: SocketAddr, within: Duration) -> Result<TcpStream, String> {
    let deadline = Instant::now() + within;
    loop {
        let attempt = async {
            let sock = if from.is_ipv4() {
                TcpSocket::new_v4()
            } else {
                TcpSocket::new_v6()
            }?;
            sock.bind(SocketAddr::new(from.ip(), 0))?;
            sock.connect(to).await
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left.max(Duration::from_millis(1)), attempt).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) if Instant::now() < deadline => {
                tracing::debug!("dialing leader at {to}: {e}; retrying");
                // Back off a little: the leader binds its port only once it starts leading.
                tokio::time::sleep(DIAL_RETRY.min(left)).await;
            }
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no connection within {within:?}")),
        }
    }
}
