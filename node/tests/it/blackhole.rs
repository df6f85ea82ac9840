//! A peer whose address silently drops connection attempts must cost the election nothing
//! (ZOOKEEPER-3756: a blocking connect to a blackholed peer stalled every election).

use std::net::TcpStream;
use std::time::Duration;

use crate::support::blackhole::Blackhole;
use crate::support::Cluster;

#[test]
fn a_blackholed_peer_does_not_delay_the_election_of_the_others() {
    let hole = Blackhole::new();
    assert!(
        TcpStream::connect_timeout(&hole.addr(), Duration::from_millis(500)).is_err(),
        "the blackhole must swallow connection attempts"
    );
    let mut c = Cluster::new(3);
    c.set_election_port(3, hole.addr().port());
    c.start(1);
    c.start(2);
    c.wait_for(Duration::from_secs(30), "1 and 2 to elect 2", |c| {
        (c.quorum_leader(&[1, 2]) == Some(2)).then_some(())
    });
    for sid in [1, 2] {
        let took = c.status(sid).unwrap()["last_election"]["took_ms"]
            .as_u64()
            .unwrap();
        // Connects to the blackhole time out only after 5 s; the election must not wait.
        assert!(
            took < 2_000,
            "n{sid}'s election took {took} ms\n{}",
            c.describe()
        );
    }
}
