//! Partitions on real namespaces, without fle-node: the DROP rules cut exactly the peers the
//! grudge names, never the controller; one-way is one-way; healing leaves no tool rule.

use crate::support;

use crate::support::run::{in_netns, root_or_skip, Cluster};
use fle_chaos::control::backend::local::NetMode;
use fle_chaos::control::fault::iptables::Cut;
use fle_chaos::control::fault::iptables::QUORUM_PORT;
use fle_chaos::control::Control;
use fle_chaos::nemesis::faults::partition::{cut, uncut};
use fle_chaos::nemesis::partition::grudge;
use fle_chaos::nemesis::schedule::PartitionShape;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

/// Runs `f` on a thread that has joined node `node`'s network namespace.
fn in_node<T: Send + 'static>(
    c: &Cluster,
    node: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    in_netns(&c.netns().unwrap().netns_of(node).unwrap(), f)
}

fn connects(to: SocketAddr) -> bool {
    TcpStream::connect_timeout(&to, Duration::from_millis(700)).is_ok()
}

/// Whether a datagram from `from` (bound in its namespace) reaches `to` within the timeout.
fn datagram_arrives(c: &Cluster, from: &str, to: &str, port: u16) -> bool {
    let (from_ip, to_ip) = (c.node_host(from).unwrap(), c.node_host(to).unwrap());
    let receiver = in_node(c, to, move || {
        UdpSocket::bind(SocketAddr::new(to_ip, port)).unwrap()
    });
    receiver
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    in_node(c, from, move || {
        let s = UdpSocket::bind(SocketAddr::new(from_ip, 0)).unwrap();
        s.send_to(b"ping", SocketAddr::new(to_ip, port)).unwrap();
    });
    let mut buf = [0u8; 16];
    receiver.recv_from(&mut buf).is_ok()
}

fn nodes(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i}")).collect()
}

#[test]
fn isolating_a_node_cuts_its_peers_but_not_the_controller() {
    if !root_or_skip("isolating_a_node_cuts_its_peers_but_not_the_controller") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = support::run::cluster(NetMode::Netns, 3, dir.path());
    let n1: IpAddr = c.node_host("n1").unwrap();
    let listener = in_node(&c, "n1", move || {
        TcpListener::bind(SocketAddr::new(n1, 7100)).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    assert!(
        in_node(&c, "n2", move || connects(addr)),
        "before the partition n2 reaches n1"
    );

    let g = grudge(
        PartitionShape::IsolateOne,
        fle_chaos::nemesis::targets::Ensemble::voting(&nodes(3)),
        &["n1".into()],
        0,
    );
    let rules = cut(c.net().unwrap(), &g, Cut::Every).unwrap();
    assert_eq!(rules["n1"].len(), 2, "n1 drops both peers: {rules:?}");
    assert!(
        !in_node(&c, "n2", move || connects(addr)),
        "n2 must not reach the isolated n1"
    );
    assert!(
        !in_node(&c, "n3", move || connects(addr)),
        "n3 must not reach the isolated n1"
    );
    assert!(connects(addr), "the controller still reaches n1");
    for node in nodes(3) {
        assert!(
            c.net().unwrap().is_cut(&node).unwrap(),
            "{node} has the tool's chain"
        );
    }

    assert!(uncut(c.net().unwrap(), &nodes(3)).is_empty());
    for node in nodes(3) {
        assert!(
            !c.net().unwrap().is_cut(&node).unwrap(),
            "{node} still has the tool's chain"
        );
    }
    assert!(
        in_node(&c, "n2", move || connects(addr)),
        "after healing n2 reaches n1 again"
    );
}

#[test]
fn one_way_drops_only_one_direction() {
    if !root_or_skip("one_way_drops_only_one_direction") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = support::run::cluster(NetMode::Netns, 3, dir.path());
    assert!(
        datagram_arrives(&c, "n1", "n2", 7200),
        "before the partition n1 reaches n2"
    );

    let g = grudge(
        PartitionShape::OneWay,
        fle_chaos::nemesis::targets::Ensemble::voting(&nodes(3)),
        &["n1".into()],
        0,
    );
    cut(c.net().unwrap(), &g, Cut::Every).unwrap();
    assert!(
        !datagram_arrives(&c, "n1", "n2", 7201),
        "n1 -> n2 must be dropped"
    );
    assert!(
        !datagram_arrives(&c, "n1", "n3", 7202),
        "n1 -> n3 must be dropped"
    );
    assert!(
        datagram_arrives(&c, "n2", "n1", 7203),
        "n2 -> n1 must still flow"
    );
    assert!(
        datagram_arrives(&c, "n2", "n3", 7204),
        "n2 -> n3 is not part of the cut"
    );

    assert!(uncut(c.net().unwrap(), &nodes(3)).is_empty());
    assert!(
        datagram_arrives(&c, "n1", "n2", 7205),
        "after healing n1 reaches n2 again"
    );
}

/// `port = "quorum"`: only the Zab connections are cut. An established connection to the
/// leader's quorum port does not see the leader's side close (its FIN is dropped) until the
/// heal, while other ports (the election's) still connect: what `older-round-followers` needs.
#[test]
fn a_quorum_port_cut_hides_the_zab_connection_end_and_passes_the_rest() {
    if !root_or_skip("a_quorum_port_cut_hides_the_zab_connection_end_and_passes_the_rest") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = support::run::cluster(NetMode::Netns, 3, dir.path());
    let n1: IpAddr = c.node_host("n1").unwrap();
    let zab = SocketAddr::new(n1, c.node_port("n1", QUORUM_PORT).unwrap());
    let other = SocketAddr::new(n1, 7300);
    let (zab_listener, other_listener) = in_node(&c, "n1", move || {
        (
            TcpListener::bind(zab).unwrap(),
            TcpListener::bind(other).unwrap(),
        )
    });
    let mut follower = in_node(&c, "n2", move || TcpStream::connect(zab).unwrap());
    let (leader_side, _) = zab_listener.accept().unwrap();

    let g = grudge(
        PartitionShape::OneWay,
        fle_chaos::nemesis::targets::Ensemble::voting(&nodes(3)),
        &["n1".into()],
        0,
    );
    let rules = cut(c.net().unwrap(), &g, Cut::Quorum).unwrap();
    assert!(
        rules["n2"].iter().all(|r| r.contains("-p tcp")),
        "only TCP to or from a quorum port: {rules:?}"
    );
    assert!(
        in_node(&c, "n2", move || connects(other)),
        "n2 still reaches n1's other ports"
    );
    drop(other_listener);
    drop(leader_side);
    follower
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 8];
    let hidden = follower.read(&mut buf);
    assert!(
        hidden.is_err(),
        "the leader's FIN must not reach n2 through the cut: {hidden:?}"
    );

    assert!(uncut(c.net().unwrap(), &nodes(3)).is_empty());
    // TCP retransmits the FIN with back-off (0.2, 0.6, 1.4, 3 s ...): wait for it, bounded.
    follower
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let end = follower.read(&mut buf);
    let ended = match &end {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(ended, "after the heal n2 sees the connection end: {end:?}");
}
