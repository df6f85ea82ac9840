//! A peer whose address silently drops connection attempts must cost the election nothing
//! (ZOOKEEPER-3756: a blocking connect to a blackholed peer stalled every election).

mod node_support;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

use node_support::Cluster;

/// A listener with a full accept queue that never accepts: the kernel drops further SYNs,
/// so connecting to it hangs like connecting to a firewalled (DROP) host.
struct Blackhole {
    listener: TcpListener,
    _filled: Vec<TcpStream>,
}

impl Blackhole {
    fn new() -> Blackhole {
        // SAFETY: plain socket calls on a new fd, which the TcpListener then owns.
        let listener = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket()");
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
                },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
                0
            );
            assert_eq!(libc::listen(fd, 0), 0);
            TcpListener::from_raw_fd(fd)
        };
        let target = listener.local_addr().unwrap();
        let mut filled = Vec::new();
        // Fill the queue until a connect times out: from then on, the port is a blackhole.
        while let Ok(s) = TcpStream::connect_timeout(&target, Duration::from_millis(300)) {
            filled.push(s);
            assert!(filled.len() < 64, "the accept queue never filled up");
        }
        Blackhole {
            listener,
            _filled: filled,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap()
    }
}

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
