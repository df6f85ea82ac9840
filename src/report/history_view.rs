//! The history view of `fle-chaos serve`: `RUN/history.jsonl?around=N` (also `from=N`,
//! `node=n3`, `kind=write|status|ok|...`, `n=ROWS`) shows the events around history index N
//! as a table, filtered by node and kind, with links to the pages before and after.
//!
//! The view reads either shape of history (`history::file`; under serve, `history.jsonl` names
//! the compressed history when that is what the folder holds). Histories can be gigabytes, so
//! nothing is loaded whole (a compressed one is held compressed): the first line at or after an
//! index is found by binary search over byte offsets (indexes grow along the file), lines are
//! then read one by one and the page is streamed out as it is written; a filtered search
//! stops after `SCAN_LIMIT` lines and links to where it stopped. Lines are decoded by the
//! one decoder (`history::line::decode`); one that does not decode is shown as it is.

use super::text::{escape, shorten};
use crate::duration::moment;
use crate::history::file::{HistoryFile, Reader};
use crate::history::line::{decode, Line};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

/// Rows per page unless `n=` says otherwise, and the most a page may ask for.
pub const ROWS: usize = 200;
const MAX_ROWS: usize = 5_000;
/// Rows shown before the index asked for.
const BEFORE: u64 = 20;
/// Lines a filtered page reads at most before it stops and links onwards.
pub const SCAN_LIMIT: u64 = 2_000_000;
const LINE_CHARS: usize = 2_000;

/// What a request asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    pub around: Option<u64>,
    pub from: Option<u64>,
    pub node: Option<String>,
    pub kind: Option<String>,
    pub rows: usize,
}

impl Query {
    /// Parses `around=N&node=n1&...`; an unknown key or a bad number is an error naming it.
    pub fn parse(q: &str) -> Result<Query, String> {
        let mut out = Query {
            rows: ROWS,
            ..Query::default()
        };
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = super::serve::percent_decode(&v.replace('+', " "))
                .ok_or_else(|| format!("{k}: not valid percent-encoding"))?;
            let num = || {
                v.trim().parse::<u64>().map_err(|_| {
                    format!("{k}={v} is not a history index: give a whole number such as {k}=1200")
                })
            };
            match k {
                "around" => out.around = Some(num()?),
                "from" => out.from = Some(num()?),
                "n" => out.rows = (num()? as usize).clamp(1, MAX_ROWS),
                "node" if !v.is_empty() => out.node = Some(v),
                "kind" if !v.is_empty() => out.kind = Some(v),
                "node" | "kind" | "view" => {}
                other => {
                    return Err(format!(
                        "unknown parameter {other}: the history view takes around, from, node, kind and n"
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The first index shown.
    fn start(&self) -> u64 {
        match (self.from, self.around) {
            (Some(f), _) => f,
            (None, Some(a)) => a.saturating_sub(BEFORE),
            (None, None) => 0,
        }
    }

    fn link(&self, from: u64) -> String {
        let mut s = format!("?from={from}&n={}", self.rows);
        if let Some(a) = self.around {
            s += &format!("&around={a}");
        }
        for (k, v) in [("node", &self.node), ("kind", &self.kind)] {
            if let Some(v) = v {
                s += &format!("&{k}={}", encode(v));
            }
        }
        s
    }
}

/// Percent-encodes what would end a query value.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// The index of the first whole line starting at or after `offset` (and where it starts).
fn line_after(file: &mut BufReader<Reader>, offset: u64) -> Option<(u64, u64)> {
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut start = offset;
    let mut buf = Vec::new();
    if offset > 0 {
        // Skip the rest of the line `offset` falls in.
        start += file.read_until(b'\n', &mut buf).ok()? as u64;
    }
    loop {
        buf.clear();
        let n = file.read_until(b'\n', &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(i) = std::str::from_utf8(&buf)
            .ok()
            .and_then(|t| decode(t.trim_end()).ok())
            .map(|l| l.index)
        {
            return Some((start, i));
        }
        start += n as u64;
    }
}

/// Byte offset of a line start at or before the first line with index ≥ `target`.
pub fn seek_index(file: &mut BufReader<Reader>, len: u64, target: u64) -> u64 {
    let (mut lo, mut hi) = (0u64, len);
    while hi - lo > 64 * 1024 {
        let mid = lo + (hi - lo) / 2;
        match line_after(file, mid) {
            Some((start, index)) if index < target && start > lo => lo = start,
            _ => hi = mid,
        }
    }
    lo
}

const CSS: &str = "body{font-family:system-ui,'DejaVu Sans',sans-serif;margin:16px;color:#222}\
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;\
text-align:left;vertical-align:top}td.j{font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere}\
tr.hl{background:#fff3b0}form{margin:8px 0}";

/// Writes the page for `q` over `path` through `out` (false: the client has gone, stop):
/// its head, the rows kept from the first index asked for on, a chunk at a time, and its foot.
pub fn render(path: &Path, q: &Query, mut out: impl FnMut(String) -> bool) {
    let opened = HistoryFile::open(path).and_then(|h| Ok((h.len(), h.reader()?)));
    let (len, file) = match opened {
        Ok(f) => f,
        Err(e) => {
            out(format!("{e:#}"));
            return;
        }
    };
    let mut file = BufReader::with_capacity(1 << 16, file);
    let start = q.start();
    let offset = seek_index(&mut file, len, start);
    let _ = file.seek(SeekFrom::Start(offset));
    if !out(page_head(q, start)) {
        return;
    }
    let (mut shown, mut scanned, mut next) = (0usize, 0u64, None);
    let mut chunk = String::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match file.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        scanned += 1;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text.trim().is_empty() {
            continue;
        }
        let decoded = decode(text).ok();
        let index = decoded.as_ref().map(|l| l.index);
        if index.is_some_and(|i| i < start) {
            continue;
        }
        if shown >= q.rows || (scanned > SCAN_LIMIT && shown > 0) || scanned > SCAN_LIMIT * 2 {
            next = index;
            break;
        }
        if !keeps(q, decoded.as_ref()) {
            continue;
        }
        shown += 1;
        chunk += &row(q, decoded.as_ref(), text);
        if chunk.len() > 32 * 1024 && !out(std::mem::take(&mut chunk)) {
            return;
        }
    }
    chunk += &page_foot(q, start, next, shown, scanned);
    out(chunk);
}

/// The page's head: its title, the filter form and the table's header.
fn page_head(q: &Query, start: u64) -> String {
    let filters: Vec<String> = [("node", &q.node), ("kind", &q.kind)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
        .collect();
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>history from \
         index {start}</title><style>{CSS}</style></head><body><h1>History from index {start}</h1>\
         <p><a href=\"report.html\">report</a> · <a href=\"history.jsonl\">the whole \
         history.jsonl</a>{}</p><form method=\"get\">node <input name=\"node\" size=\"6\" \
         value=\"{}\"> kind <input name=\"kind\" size=\"10\" value=\"{}\" \
         placeholder=\"status, write, ok…\"> from index <input name=\"from\" size=\"9\" \
         value=\"{start}\"> <button>show</button></form>\
         <table><tr><th>index</th><th>time</th><th>node</th><th>event</th><th>line</th></tr>\n",
        if filters.is_empty() {
            String::new()
        } else {
            format!(" · filtered: {}", escape(&filters.join(", ")))
        },
        escape(q.node.as_deref().unwrap_or("")),
        escape(q.kind.as_deref().unwrap_or("")),
    )
}

/// Whether a line passes the query's filters (a line that is no event only when none is set).
fn keeps(q: &Query, decoded: Option<&Line>) -> bool {
    match decoded {
        None => q.node.is_none() && q.kind.is_none(),
        Some(l) => {
            q.node
                .as_deref()
                .is_none_or(|n| l.node.as_deref() == Some(n))
                && q.kind.as_deref().is_none_or(|k| {
                    l.f_name == k || format!("{:?}", l.kind).eq_ignore_ascii_case(k)
                })
        }
    }
}

/// One table row for a line (`text`), highlighted when it is the event asked around.
fn row(q: &Query, decoded: Option<&Line>, text: &str) -> String {
    let (idx, time, node, what) = match decoded {
        Some(l) => (
            l.index.to_string(),
            moment(l.time),
            l.node.as_deref().unwrap_or(&l.process).to_string(),
            format!("{} {}", l.f_name, format!("{:?}", l.kind).to_lowercase()),
        ),
        None => (
            "?".into(),
            String::new(),
            String::new(),
            "not an event".into(),
        ),
    };
    let index = decoded.map(|l| l.index);
    let hl = index.is_some() && index == q.around;
    format!(
        "<tr{} id=\"ev-{idx}\"><td>{idx}</td><td>{time}</td><td>{}</td><td>{}</td>\
         <td class=\"j\">{}</td></tr>\n",
        if hl { " class=\"hl\"" } else { "" },
        escape(&node),
        escape(&what),
        escape(&shorten(text, LINE_CHARS))
    )
}

/// The page's foot: links to the earlier and later pages, or the end of the history.
fn page_foot(q: &Query, start: u64, next: Option<u64>, shown: usize, scanned: u64) -> String {
    let mut chunk = String::from("</table>\n<p>");
    if start > 0 {
        chunk += &format!(
            "<a id=\"earlier\" href=\"{}\">earlier</a> · ",
            escape(&q.link(start.saturating_sub(q.rows as u64)))
        );
    }
    match next {
        Some(n) => {
            chunk += &format!("<a id=\"later\" href=\"{}\">later</a>", escape(&q.link(n)));
            if shown < q.rows {
                chunk += &format!(" (searched {scanned} lines; the search goes on from index {n})");
            }
        }
        None => chunk += &format!("end of the history ({shown} shown)"),
    }
    chunk += "</p></body></html>\n";
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A history of `n` events, two nodes' status reads and a client's writes, with a
    /// blank line and a line that is no event in the middle.
    fn history(n: u64) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut w = std::io::BufWriter::new(f.as_file_mut());
        for i in 0..n {
            if i == n / 2 {
                writeln!(w).unwrap();
                writeln!(w, "not json").unwrap();
            }
            let line = if i % 3 == 2 {
                format!(
                    r#"{{"index":{i},"time":{},"process":"0","type":"invoke","f":"write","value":{{"value":{i}}}}}"#,
                    i * 1000
                )
            } else {
                format!(
                    r#"{{"index":{i},"time":{t},"process":"n{k}","type":"fail","f":"status","node":"n{k}","value":{{"error":"timeout"}}}}"#,
                    k = i % 3 + 1,
                    t = i * 1000
                )
            };
            writeln!(w, "{line}").unwrap();
        }
        drop(w);
        f
    }

    /// The same history as zstd frames of about 64 KiB of whole lines, as a run writes it.
    fn compressed(plain: &tempfile::NamedTempFile) -> tempfile::NamedTempFile {
        let text = std::fs::read(plain.path()).unwrap();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let frames = crate::history::store::compress_lines(&text, 64 << 10).unwrap();
        f.write_all(&frames).unwrap();
        f
    }

    fn page(f: &tempfile::NamedTempFile, q: &str) -> String {
        let mut out = String::new();
        render(f.path(), &Query::parse(q).unwrap(), |c| {
            out += &c;
            true
        });
        out
    }

    fn indexes(page: &str) -> Vec<u64> {
        page.split("<tr")
            .filter_map(|r| r.split("id=\"ev-").nth(1)?.split('"').next()?.parse().ok())
            .collect()
    }

    #[test]
    fn the_view_finds_an_index_by_binary_search_and_pages_from_it() {
        let plain = history(200_000);
        let zst = compressed(&plain);
        for f in [&plain, &zst] {
            finds_and_pages(f);
        }
    }

    fn finds_and_pages(f: &tempfile::NamedTempFile) {
        let history = HistoryFile::open(f.path()).unwrap();
        let mut file = BufReader::new(history.reader().unwrap());
        let len = history.len();
        for target in [0, 1, 77_777, 100_000, 199_999] {
            // From the offset found, the target is ahead and near: never past, never far.
            let at = seek_index(&mut file, len, target);
            file.seek(SeekFrom::Start(at)).unwrap();
            let (mut skipped, mut line) = (0u64, String::new());
            loop {
                line.clear();
                file.read_line(&mut line).unwrap();
                match decode(line.trim_end()).ok().map(|l| l.index) {
                    Some(i) if i == target => break,
                    Some(i) => assert!(i < target, "{target}: landed past it, at {i}"),
                    None => {}
                }
                skipped += line.len() as u64;
            }
            assert!(
                skipped <= 200 * 1024,
                "{target}: {skipped} bytes to read through"
            );
        }
        let p = page(f, "around=150000&n=50");
        let shown = indexes(&p);
        assert_eq!(shown.first(), Some(&(150_000 - BEFORE)));
        assert_eq!(shown.len(), 50);
        assert!(p.contains("<tr class=\"hl\" id=\"ev-150000\">"));
        assert!(p.contains("<a id=\"later\" href=\"?from=150030&amp;n=50&amp;around=150000\">"));

        // Filters: one node, one kind; the line that is not an event is shown unfiltered.
        let p = page(f, "from=99990&node=n2&n=5");
        let shown = indexes(&p);
        assert_eq!(shown.len(), 5);
        assert!(shown.iter().all(|i| i % 3 == 1), "{shown:?}");
        let p = page(f, "from=99990&kind=write&n=3");
        assert!(indexes(&p).iter().all(|i| i % 3 == 2));
        assert!(page(f, "from=99998&n=5").contains("not an event"));
        assert!(page(f, "from=199998").contains("end of the history (2 shown)"));
    }

    #[test]
    fn bad_queries_name_the_parameter_and_the_fix() {
        let e = Query::parse("around=abc").unwrap_err();
        assert!(
            e.contains("around=abc") && e.contains("whole number"),
            "{e}"
        );
        let e = Query::parse("color=red").unwrap_err();
        assert!(e.contains("unknown parameter color"), "{e}");
        assert_eq!(Query::parse("n=999999").unwrap().rows, MAX_ROWS);
    }
}
