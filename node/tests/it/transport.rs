//! The election transport in-process over real loopback TCP: delivery both ways, the
//! one-message send slot, and the re-send of the last message when a peer comes back.

use std::collections::BTreeMap;
use std::time::Duration;

use fle_node::api::ServerState;
use fle_node::peers::{Identity, Peers};
use fle_node::wire::Notification;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(20);

fn note(round: u64) -> Notification {
    Notification {
        state: ServerState::Looking,
        leader: 2,
        zxid: 7,
        election_epoch: round,
        peer_epoch: 1,
        version: 2,
        config: b"version=0".to_vec(),
    }
}

type Inbound = mpsc::Receiver<(u64, Notification)>;

async fn start(sid: u64, listener: TcpListener, addrs: &BTreeMap<u64, String>) -> (Peers, Inbound) {
    let (tx, rx) = mpsc::channel(1024);
    let me = Identity {
        sid,
        host: "127.0.0.1".into(),
        election_addr: addrs[&sid].clone(),
    };
    (Peers::start(me, listener, addrs.clone(), tx), rx)
}

/// Receives until a notification with `round` arrives; returns how many came before it.
async fn recv_round(rx: &mut Inbound, from: u64, round: u64) -> usize {
    let mut before = 0;
    let wait = async {
        loop {
            let (sid, n) = rx.recv().await.expect("transport stopped");
            assert_eq!(sid, from);
            if n.election_epoch == round {
                assert_eq!(n, note(round), "delivered intact");
                return;
            }
            before += 1;
        }
    };
    tokio::time::timeout(LIMIT, wait)
        .await
        .unwrap_or_else(|_| panic!("round {round} from {from} never arrived"));
    before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_both_ways_keeps_the_latest_and_resends_after_a_restart() {
    let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addrs: BTreeMap<u64, String> = [
        (1, l1.local_addr().unwrap().to_string()),
        (2, l2.local_addr().unwrap().to_string()),
    ]
    .into();
    let (p1, mut in1) = start(1, l1, &addrs).await;
    let (p2, mut in2) = start(2, l2, &addrs).await;

    p1.send(2, &note(1));
    p2.send(1, &note(1));
    recv_round(&mut in2, 1, 1).await;
    recv_round(&mut in1, 2, 1).await;

    // A burst: the slot holds one message, so the last one always arrives, older may not.
    for round in 2..=200 {
        p1.send(2, &note(round));
    }
    let skipped_or_sent = recv_round(&mut in2, 1, 200).await;
    assert!(skipped_or_sent <= 198);

    // Server 2 goes away; 1 sends while it is down; 2 comes back on the same port.
    drop(p2);
    drop(in2);
    p1.send(2, &note(300));
    // The aborted acceptor frees the port asynchronously: poll until it can be bound again.
    let end = tokio::time::Instant::now() + LIMIT;
    let l2 = loop {
        match TcpListener::bind(&addrs[&2]).await {
            Ok(l) => break l,
            Err(e) if tokio::time::Instant::now() >= end => panic!("rebind server 2's port: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let (_p2, mut in2) = start(2, l2, &addrs).await;
    recv_round(&mut in2, 1, 300).await;
    p1.send(2, &note(301));
    recv_round(&mut in2, 1, 301).await;
}
