//! `fle-chaos serve`: the reports folder over HTTP, for browsing runs as with Jepsen's
//! `serve`. The root page is the run index, built fresh on every request; everything else
//! is a file under the folder (never outside it), directories get a listing, and
//! `history.jsonl?around=N` (any query) is the history view (`history_view`). A run's
//! `history.jsonl` is its history in either shape: the compressed `history.jsonl.zst` is sent
//! as plain text under that name.

use super::index::{find_runs, index_html};
use super::text::escape;
use crate::history;
use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Binds `addr` and serves `root` until the process ends. `on_bound` receives the address
/// actually bound (port 0 picks a free port).
pub async fn serve_dir(
    root: PathBuf,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<()> {
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot open {}", root.display()))?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        crate::exit::bad_input(format!(
            "cannot listen on {addr}: {e}; choose another --port (or --port 0 for any free one)"
        ))
    })?;
    on_bound(listener.local_addr()?);
    let app = Router::new().fallback(handle).with_state(Arc::new(root));
    axum::serve(listener, app)
        .await
        .context("the HTTP server failed")?;
    Ok(())
}

async fn handle(State(root): State<Arc<PathBuf>>, uri: Uri) -> Response {
    let Some(rel) = safe_relative(uri.path()) else {
        return (StatusCode::BAD_REQUEST, "bad path").into_response();
    };
    if rel.as_os_str().is_empty() || rel == Path::new("index.html") {
        let root = root.as_ref().clone();
        let html = tokio::task::spawn_blocking(move || index_html(&find_runs(&root)))
            .await
            .unwrap_or_default();
        return html_response(html);
    }
    let mut path = root.join(&rel);
    // `history.jsonl` names a run's history in either shape: the compressed one is served
    // as its plain text.
    let plain_of_compressed = path.file_name().is_some_and(|n| n == history::file::PLAIN)
        && !path.exists()
        && path.with_file_name(history::file::WRITTEN).is_file();
    if plain_of_compressed {
        path = path.with_file_name(history::file::WRITTEN);
    }
    // Symlinks (reports/latest) may be followed, but never out of the folder.
    let Ok(real) = tokio::fs::canonicalize(&path).await else {
        return not_found(&rel);
    };
    if !real.starts_with(root.as_ref()) {
        return not_found(&rel);
    }
    if real.is_dir() {
        let index = real.join("index.html");
        if index.is_file() {
            return file_response(&index).await;
        }
        if !uri.path().ends_with('/') {
            let to = format!("{}/", uri.path());
            return (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, to)]).into_response();
        }
        return listing(&real, uri.path()).await;
    }
    let is_history = real
        .file_name()
        .is_some_and(|n| history::file::NAMES.iter().any(|h| n == *h));
    if is_history {
        if let Some(q) = uri.query().filter(|q| !q.is_empty()) {
            return history_page(real, q);
        }
    }
    if plain_of_compressed {
        return plain_history(real);
    }
    file_response(&real).await
}

/// A compressed history's plain text, decompressed as it is sent.
fn plain_history(path: PathBuf) -> Response {
    blocking_body("text/plain; charset=utf-8", move |send| {
        use std::io::Read;
        let mut reader = match history::file::HistoryFile::open(&path).and_then(|h| h.reader()) {
            Ok(r) => r,
            Err(e) => {
                send(Err(std::io::Error::other(format!("{e:#}"))));
                return;
            }
        };
        loop {
            let mut buf = vec![0u8; 64 * 1024];
            match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    buf.truncate(n);
                    if !send(Ok(buf)) {
                        return; // the client has gone
                    }
                }
                // Report the error once, then end the stream.
                Err(e) => {
                    send(Err(e));
                    return;
                }
            }
        }
    })
}

/// The history view, streamed as it is written.
fn history_page(path: PathBuf, query: &str) -> Response {
    let q = match super::history_view::Query::parse(query) {
        Ok(q) => q,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    blocking_body("text/html; charset=utf-8", move |send| {
        super::history_view::render(&path, &q, |chunk| send(Ok(chunk.into_bytes())));
    })
}

/// A response body that a blocking producer writes chunk by chunk (through a channel, off the
/// async threads); `send` says false once the client has gone.
fn blocking_body(
    content_type: &'static str,
    produce: impl FnOnce(&mut dyn FnMut(std::io::Result<Vec<u8>>) -> bool) + Send + 'static,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    tokio::task::spawn_blocking(move || produce(&mut |chunk| tx.blocking_send(chunk).is_ok()));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The request path as a relative path with no `..`, percent-decoded; None if it tries to
/// leave the folder.
pub fn safe_relative(path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path)?;
    let rel = Path::new(decoded.trim_start_matches('/'));
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "xml" => "application/xml",
        "css" => "text/css",
        // JSONL, logs and everything else: readable in the browser, never downloaded blindly.
        _ => "text/plain; charset=utf-8",
    }
}

async fn file_response(path: &Path) -> Response {
    match tokio::fs::File::open(path).await {
        Ok(file) => {
            let stream = file_stream(file);
            (
                [(header::CONTENT_TYPE, content_type(path))],
                Body::from_stream(stream),
            )
                .into_response()
        }
        Err(_) => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// Streams a file in 64 KiB chunks: histories can be gigabytes.
fn file_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(file)))
            }
            // Report the error once, then end the stream.
            Err(e) => Some((Err(e), None)),
        }
    })
}

async fn listing(dir: &Path, url_path: &str) -> Response {
    let mut names = Vec::new();
    if let Ok(mut rd) = tokio::fs::read_dir(dir).await {
        while let Ok(Some(e)) = rd.next_entry().await {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().await.map(|t| t.is_dir()).unwrap_or(false) {
                name.push('/');
            }
            names.push(name);
        }
    }
    names.sort();
    let mut h = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{0}</title></head><body>\
         <h1>{0}</h1><ul><li><a href=\"../\">../</a></li>",
        escape(url_path)
    );
    for n in names {
        h += &format!("<li><a href=\"{0}\">{0}</a></li>", escape(&n));
    }
    h += "</ul></body></html>";
    html_response(h)
}

fn html_response(html: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

fn not_found(rel: &Path) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("{} not found", rel.display()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_leave_the_folder() {
        assert_eq!(safe_relative("/a/b.html"), Some(PathBuf::from("a/b.html")));
        assert_eq!(safe_relative("/a%20b/"), Some(PathBuf::from("a b")));
        assert_eq!(safe_relative("/"), Some(PathBuf::new()));
        assert_eq!(safe_relative("/../etc/passwd"), None);
        assert_eq!(safe_relative("/a/%2e%2e/%2e%2e/x"), None);
        assert_eq!(safe_relative("/%zz"), None);
    }
}
