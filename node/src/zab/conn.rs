//! One quorum-port TCP connection as two tasks: a reader that turns bytes into [`Msg`]s for the
//! role's loop, and a writer that drains a queue (batching frames into one write).
//!
//! Bad bytes end only this connection: the reader reports why and stops. Dropping the [`Conn`]
//! aborts both tasks, which closes the socket.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::zab::messages::{decode_frame, Msg};

pub(crate) enum ConnEvent {
    Frame(u64, Msg),
    Closed(u64, String),
}

pub(crate) struct Conn {
    pub tx: mpsc::UnboundedSender<Msg>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

/// Starts the tasks of connection `id`; its frames and its end arrive on `events`. `prefix`
/// holds bytes already read from the stream (the handshake), decoded first.
pub(crate) fn spawn_conn(
    stream: TcpStream,
    prefix: Vec<u8>,
    id: u64,
    events: mpsc::UnboundedSender<ConnEvent>,
) -> Conn {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let ev = events.clone();
    let reader = tokio::spawn(async move {
        let mut buf: Vec<u8> = prefix;
        let mut chunk = vec![0u8; 64 * 1024];
        let why = loop {
            let mut used = 0;
            let err = loop {
                match decode_frame(&buf[used..]) {
                    Ok(Some((m, n))) => {
                        used += n;
                        if ev.send(ConnEvent::Frame(id, m)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break None,
                    Err(e) => break Some(format!("bad bytes from the peer: {e}")),
                }
            };
            buf.drain(..used);
            if let Some(e) = err {
                break e;
            }
            match rd.read(&mut chunk).await {
                Ok(0) => break "closed by the peer".to_string(),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => break format!("read failed: {e}"),
            }
        };
        let _ = ev.send(ConnEvent::Closed(id, why));
    });
    let writer = tokio::spawn(async move {
        let mut buf = Vec::with_capacity(64 * 1024);
        while let Some(m) = rx.recv().await {
            buf.clear();
            m.encode(&mut buf);
            while buf.len() < (1 << 20) {
                match rx.try_recv() {
                    Ok(m) => m.encode(&mut buf),
                    Err(_) => break,
                }
            }
            if let Err(e) = wr.write_all(&buf).await {
                let _ = events.send(ConnEvent::Closed(id, format!("write failed: {e}")));
                return;
            }
        }
    });
    Conn { tx, reader, writer }
}
