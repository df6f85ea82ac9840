//! A port that silently drops connection attempts, on loopback and without firewall rules.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

/// A listener with a full accept queue that never accepts: the kernel drops further SYNs,
/// so connecting to it hangs like connecting to a firewalled (DROP) host.
pub struct Blackhole {
    listener: TcpListener,
    _filled: Vec<TcpStream>,
}

impl Blackhole {
    pub fn new() -> Blackhole {
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

    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap()
    }
}
