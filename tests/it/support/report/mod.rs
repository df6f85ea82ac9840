//! Helpers shared by the report tests: a small strict XML parser (for SVG and JUnit; it
//! rejects mismatched tags, bad attributes, bare `<`/`&` and unknown entities), PNG decoding,
//! and a minimal HTTP GET over a real socket; `fixture` writes the synthetic run folders the
//! tests (and `benches/report.rs`) render.

pub mod fixture;

use std::collections::HashSet;
use std::io::{Read, Write};

/// An XML element: name, attributes (entities decoded), children, text content.
#[derive(Debug, Clone)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every descendant (self included) named `name`, in document order.
    pub fn find_all<'a>(&'a self, name: &str, out: &mut Vec<&'a Element>) {
        if self.name == name {
            out.push(self);
        }
        for c in &self.children {
            c.find_all(name, out);
        }
    }

    pub fn all(&self, name: &str) -> Vec<&Element> {
        let mut v = Vec::new();
        self.find_all(name, &mut v);
        v
    }
}

/// Parses a whole XML document with exactly one root element.
pub fn parse_xml(doc: &str) -> Result<Element, String> {
    let mut p = Parser {
        s: doc.as_bytes(),
        i: 0,
    };
    p.skip_misc()?;
    let root = p.element()?;
    p.skip_misc()?;
    if p.i != p.s.len() {
        return Err(format!("content after the root element at byte {}", p.i));
    }
    Ok(root)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &[u8] {
        &self.s[self.i..]
    }

    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn skip_until(&mut self, end: &str) -> Result<(), String> {
        let pos = find(self.rest(), end.as_bytes()).ok_or(format!("unterminated, wanted {end}"))?;
        self.i += pos + end.len();
        Ok(())
    }

    /// XML declaration, comments, doctype, whitespace.
    fn skip_misc(&mut self) -> Result<(), String> {
        loop {
            self.skip_ws();
            if self.rest().starts_with(b"<?") {
                self.skip_until("?>")?;
            } else if self.rest().starts_with(b"<!--") {
                self.skip_until("-->")?;
            } else if self.rest().starts_with(b"<!DOCTYPE") {
                self.skip_until(">")?;
            } else {
                return Ok(());
            }
        }
    }

    fn name(&mut self) -> Result<String, String> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b":_-.".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(format!("expected a name at byte {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn element(&mut self) -> Result<Element, String> {
        if !self.rest().starts_with(b"<") {
            return Err(format!("expected '<' at byte {}", self.i));
        }
        self.i += 1;
        let name = self.name()?;
        let mut el = Element {
            name,
            attrs: Vec::new(),
            children: Vec::new(),
            text: String::new(),
        };
        let mut seen = HashSet::new();
        loop {
            let before = self.i;
            self.skip_ws();
            if self.rest().starts_with(b"/>") {
                self.i += 2;
                return Ok(el);
            }
            if self.rest().starts_with(b">") {
                self.i += 1;
                break;
            }
            if self.i == before {
                return Err(format!(
                    "expected whitespace before an attribute at byte {}",
                    self.i
                ));
            }
            let k = self.name()?;
            self.skip_ws();
            if !self.rest().starts_with(b"=") {
                return Err(format!("attribute {k} without '=' at byte {}", self.i));
            }
            self.i += 1;
            self.skip_ws();
            let q = *self.s.get(self.i).ok_or("eof in attribute")?;
            if q != b'"' && q != b'\'' {
                return Err(format!("unquoted attribute {k}"));
            }
            self.i += 1;
            let end = self
                .rest()
                .iter()
                .position(|&c| c == q)
                .ok_or("unterminated attribute")?;
            let raw = String::from_utf8_lossy(&self.s[self.i..self.i + end]).into_owned();
            if raw.contains('<') {
                return Err(format!("'<' in attribute {k}"));
            }
            self.i += end + 1;
            if !seen.insert(k.clone()) {
                return Err(format!("duplicate attribute {k}"));
            }
            el.attrs.push((k, decode(&raw)?));
        }
        loop {
            let end = self
                .rest()
                .iter()
                .position(|&c| c == b'<')
                .ok_or(format!("<{}> never closed", el.name))?;
            el.text += &decode(&String::from_utf8_lossy(&self.s[self.i..self.i + end]))?;
            self.i += end;
            if self.rest().starts_with(b"</") {
                self.i += 2;
                let close = self.name()?;
                if close != el.name {
                    return Err(format!("<{}> closed by </{close}>", el.name));
                }
                self.skip_ws();
                if !self.rest().starts_with(b">") {
                    return Err("bad closing tag".into());
                }
                self.i += 1;
                return Ok(el);
            } else if self.rest().starts_with(b"<!--") {
                self.skip_until("-->")?;
            } else if self.rest().starts_with(b"<![CDATA[") {
                self.skip_until("]]>")?;
            } else {
                let child = self.element()?;
                el.children.push(child);
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn decode(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out += &rest[..p];
        let semi = rest[p..].find(';').ok_or(format!("bare '&' in {s:?}"))?;
        let ent = &rest[p + 1..p + semi];
        out.push(match ent {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            e if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or(format!("bad entity &{e};"))?,
            e if e.starts_with('#') => e[1..]
                .parse()
                .ok()
                .and_then(char::from_u32)
                .ok_or(format!("bad entity &{e};"))?,
            e => return Err(format!("unknown entity &{e};")),
        });
        rest = &rest[p + semi + 1..];
    }
    Ok(out + rest)
}

/// Decodes a PNG file into (width, height, RGB pixels).
/// Ours are RGB; Chromium's screenshots RGBA (alpha dropped); other layouts are expanded to
/// 8-bit channels first.
pub fn read_png(path: &std::path::Path) -> (u32, u32, Vec<[u8; 3]>) {
    let not_png =
        |e: &dyn std::fmt::Display| -> ! { panic!("{} is not a PNG: {e}", path.display()) };
    let file = std::fs::File::open(path).unwrap_or_else(|e| not_png(&e));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap_or_else(|e| not_png(&e));
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).unwrap_or_else(|e| not_png(&e));
    let bytes = &buf[..frame.buffer_size()];
    let pixels = match frame.color_type {
        png::ColorType::Rgb => bytes.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
        png::ColorType::Rgba => bytes.chunks_exact(4).map(|p| [p[0], p[1], p[2]]).collect(),
        png::ColorType::Grayscale => bytes.iter().map(|&g| [g, g, g]).collect(),
        png::ColorType::GrayscaleAlpha => {
            bytes.chunks_exact(2).map(|p| [p[0], p[0], p[0]]).collect()
        }
        other => not_png(&format!("{other:?} pixels after expansion")),
    };
    (frame.width, frame.height, pixels)
}

pub fn distinct_colors(pixels: &[[u8; 3]]) -> usize {
    pixels.iter().collect::<HashSet<_>>().len()
}

/// Pixels close to `color` (anti-aliasing blends edges).
pub fn count_near(pixels: &[[u8; 3]], color: [u8; 3]) -> usize {
    pixels
        .iter()
        .filter(|p| {
            p.iter()
                .zip(color)
                .all(|(a, b)| (*a as i32 - b as i32).abs() <= 6)
        })
        .count()
}

/// GET over a fresh TCP connection: (status, content type, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to serve");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let split = find(&raw, b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, ctype, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = find(b, b"\r\n").expect("chunk size line");
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[line_end + 2..line_end + 2 + size]);
        b = &b[line_end + 2 + size + 2..];
    }
}

#[test]
fn the_xml_parser_rejects_what_is_not_xml() {
    assert!(parse_xml("<a><b x=\"1\">t&amp;</b></a>").is_ok());
    for bad in [
        "<a><b></a>",
        "<a x=1></a>",
        "<a>&nbsp;</a>",
        "<a>x & y</a>",
        "<a></a><b/>",
        "<a x=\"1\" x=\"2\"/>",
        "<a>",
    ] {
        assert!(parse_xml(bad).is_err(), "{bad}");
    }
}

/// A `fle-chaos serve` we started, killed (by its pid) when dropped.
pub struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `fle-chaos serve --port 0 --dir root`; returns it and the address it printed.
pub fn serve(root: &std::path::Path) -> (Server, String) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .args(["serve", "--port", "0", "--dir"])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fle-chaos serve");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("serve printed its address");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    (server, addr)
}

/// A run folder (`<root>/t/r`) holding the checked-in fixture `case` (tests/fixtures/<case>),
/// checked by the real checkers and rendered by the real report.
pub fn rendered_fixture(root: &std::path::Path, case: &str) -> std::path::PathBuf {
    let run = root.join("t").join("r");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case);
    std::fs::create_dir_all(&run).unwrap();
    for f in ["history.jsonl", "test.json"] {
        std::fs::copy(fixture.join(f), run.join(f)).unwrap();
    }
    let results = fle_chaos::checker::check_run(&run, &Default::default()).unwrap();
    fle_chaos::checker::write_results(&run, &results).unwrap();
    fle_chaos::report::render_run(&run).unwrap();
    run
}
