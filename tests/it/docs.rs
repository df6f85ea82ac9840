//! The docs as reference: README.md and docs/*.md say what is, and this test fails when they
//! drift from the code. On every page: lines of at most 120 characters; no dates (YYYY-MM-DD)
//! or times of day (`HH:MM UTC`, `HH:MM-HH:MM`) outside docs/benchmarks.md, whose history
//! section holds the dated figures; no "issue N"
//! (readers cannot resolve it); every relative link resolves to a file of the repository; every
//! repository path named in backticks or a code block exists; every test filter of
//! `cargo test ... --test it` names a test module or function that exists; every `--flag` said
//! of fle-chaos or fle-node is one of their flags, read from the built binaries' `--help`.
//! `checks_catch_drift` feeds the checks a bad page, so they are shown to fail. Needs no root.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// At most this many characters a line.
const MAX_LINE: usize = 120;

/// The one page where dates (and dated figures) live: its history section.
const DATED_PAGE: &str = "docs/benchmarks.md";

/// Dates allowed elsewhere: none. A ZooKeeper fact that needs its date (a release) would get a
/// row here, with why; our own measurements never do (they go to DATED_PAGE).
const ALLOWED_DATES: &[&str] = &[];

/// Where a repository path a doc names begins. `reports/` is left out: it is a run's output
/// folder, its contents differ from machine to machine.
const REPO_PREFIXES: &[&str] = &[
    "src/",
    "tests/",
    "node/",
    "docs/",
    "nemesis/",
    "workloads/",
    "benches/",
    ".ci/",
];

/// One drift found: where, and what to fix.
#[derive(Debug, Clone, PartialEq)]
struct Problem {
    file: String,
    line: usize,
    kind: Kind,
    what: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    LongLine,
    Date,
    TimeOfDay,
    IssueRef,
    Link,
    Path,
    TestFilter,
    Flag,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// What the checks compare a page with: the repository and the binaries' flags.
struct Ctx {
    root: PathBuf,
    /// fle-chaos's flags, every subcommand's.
    chaos_flags: BTreeSet<String>,
    /// fle-node's flags; None when its binary is not built (its flags are then not checked).
    node_flags: Option<BTreeSet<String>>,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and docs/*.md, as paths relative to the repository.
fn doc_pages(root: &Path) -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Every `--flag` a program's help lists, its subcommands' (from "Commands:") included.
fn help_flags(program: &Path, args: &mut Vec<String>, flags: &mut BTreeSet<String>) {
    let out = Command::new(program)
        .args(args.iter())
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{} {args:?} --help: {e}", program.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !text.is_empty(),
        "{} {args:?} --help failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut section = "";
    let mut subcommands = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            // "Commands:", "Options:", "Arguments:".
            section = line;
            continue;
        }
        let item = line.trim_start();
        let indent = line.len() - item.len();
        if section == "Commands:" && indent == 2 {
            let name = item.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                subcommands.push(name.to_string());
            }
        } else if indent <= 6 && item.starts_with('-') {
            // "-h, --help" or "--nodes <N>": the option's own line, not its description.
            if let Some(flag) = item.split([' ', ',', '=']).find(|w| w.starts_with("--")) {
                flags.insert(flag.to_string());
            }
        }
    }
    for sub in subcommands {
        args.push(sub);
        help_flags(program, args, flags);
        args.pop();
    }
}

fn context() -> Ctx {
    let root = repo_root();
    let mut chaos_flags = BTreeSet::new();
    help_flags(
        Path::new(env!("CARGO_BIN_EXE_fle-chaos")),
        &mut Vec::new(),
        &mut chaos_flags,
    );
    assert!(
        chaos_flags.contains("--nodes") && chaos_flags.contains("--replay"),
        "fle-chaos --help parsed into too few flags: {chaos_flags:?}"
    );
    let node = PathBuf::from(support::run::fle_node());
    let node_flags = if node.exists() {
        let mut flags = BTreeSet::new();
        help_flags(&node, &mut Vec::new(), &mut flags);
        Some(flags)
    } else {
        support::skip::skip(
            "docs::flags (fle-node's part)",
            &format!(
                "{} is not built (cargo build --release -p fle-node)",
                node.display()
            ),
        );
        None
    };
    Ctx {
        root,
        chaos_flags,
        node_flags,
    }
}

/// The inline code spans of a line (text between single backticks).
fn code_spans(line: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else { break };
        spans.push(&after[..end]);
        rest = &after[end + 1..];
    }
    spans
}

/// The line without its inline code spans.
fn prose(line: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in line.chars() {
        if c == '`' {
            inside = !inside;
            out.push(' ');
        } else if !inside {
            out.push(c);
        }
    }
    out
}

/// `YYYY-MM-DD` dates in a line.
fn dates(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let mut found = Vec::new();
    for i in 0..b.len().saturating_sub(9) {
        let boundary_before = i == 0 || !b[i - 1].is_ascii_digit();
        let boundary_after = i + 10 == b.len() || !b[i + 10].is_ascii_digit();
        if boundary_before
            && boundary_after
            && digits(i..i + 4)
            && b[i + 4] == b'-'
            && digits(i + 5..i + 7)
            && b[i + 7] == b'-'
            && digits(i + 8..i + 10)
        {
            found.push(line[i..i + 10].to_string());
        }
    }
    found
}

/// Times of day a journal leaves behind: `HH:MM` (or `HH:MM:SS`) followed by "UTC", and a range
/// `HH:MM-HH:MM` (hyphen or en dash), with or without "UTC". A time inside a longer run of digits
/// and colons (`127.0.0.1:8081`, `18:23:37.522` in a quoted log line) is not one.
fn times_of_day(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    // A time beginning at i: its end, or None.
    let time_at = |i: usize| -> Option<usize> {
        if i > 0 && (digit(i - 1) || matches!(b[i - 1], b':' | b'.')) {
            return None;
        }
        let hour_len = if digit(i) && digit(i + 1) { 2 } else { 1 };
        if !digit(i) || b.get(i + hour_len) != Some(&b':') {
            return None;
        }
        let m = i + hour_len + 1;
        if !(digit(m) && digit(m + 1)) || digit(m + 2) {
            return None;
        }
        let hour: u32 = line[i..i + hour_len].parse().ok()?;
        let minute: u32 = line[m..m + 2].parse().ok()?;
        if hour > 23 || minute > 59 {
            return None;
        }
        let mut end = m + 2;
        if b.get(end) == Some(&b':') && digit(end + 1) && digit(end + 2) && !digit(end + 3) {
            end += 3;
        }
        // A longer dotted or coloned run (an address, a log's milliseconds) is not a time.
        if matches!(b.get(end), Some(b':')) || (b.get(end) == Some(&b'.') && digit(end + 1)) {
            return None;
        }
        Some(end)
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let Some(end) = time_at(i) else {
            i += 1;
            continue;
        };
        let rest = &line[end..];
        let dash = ["-", "\u{2013}"]
            .iter()
            .find_map(|d| rest.strip_prefix(d).map(|r| (d.len(), r)));
        let range_end = dash.and_then(|(len, _)| time_at(end + len));
        let stop = range_end.unwrap_or(end);
        let utc = line[stop..].trim_start().starts_with("UTC");
        if range_end.is_some() || utc {
            found.push(line[i..stop].to_string());
        }
        i = stop.max(i + 1);
    }
    found
}

/// "issue 12", "issue #12", "issues 3", or a bare "#12": references a reader cannot resolve.
fn issue_refs(line: &str) -> Vec<String> {
    let lower = line.to_lowercase();
    let b = lower.as_bytes();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices("issue") {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = lower[i + 5..].trim_start_matches('s').trim_start();
        let rest = rest.trim_start_matches('#');
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            found.push(line[i..].chars().take(16).collect());
        }
    }
    for (i, _) in lower.match_indices('#') {
        let said = lower[..i].trim_end();
        if said.ends_with("issue") || said.ends_with("issues") {
            continue; // counted above
        }
        let before_ok = i == 0 || matches!(b[i - 1], b' ' | b'(' | b'[' | b',');
        if before_ok && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            found.push(line[i..].chars().take(8).collect());
        }
    }
    found
}

/// The targets of markdown links: `[text](target)` and `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for (i, _) in line.match_indices("](") {
        let after = &line[i + 2..];
        if let Some(end) = after.find(')') {
            targets.push(after[..end].trim().to_string());
        }
    }
    let t = line.trim_start();
    if t.starts_with('[') {
        if let Some(i) = t.find("]: ") {
            targets.push(t[i + 3..].trim().to_string());
        }
    }
    targets
}

/// A placeholder rather than a real path: `<x>`, `NAME`, `*`, `...`.
fn is_placeholder(path: &str) -> bool {
    path.contains(['<', '>', '*', '{', '}', '[', ']', '$', '…'])
        || path.contains("...")
        || path.split('/').any(|part| {
            // NAME.toml, RUN_DIR, MODULE::NAME: letters all capitals.
            let stem = part.split('.').next().unwrap_or("");
            let mut letters = stem.chars().filter(char::is_ascii_alphabetic).peekable();
            letters.peek().is_some()
                && letters.all(|c| c.is_ascii_uppercase())
                && !matches!(stem, "README" | "LICENSE")
        })
}

/// Repository paths in a piece of code: words beginning with one of REPO_PREFIXES, without a
/// `:line` or `::item` suffix.
fn repo_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for word in code.split(|c: char| c.is_whitespace() || "\"'(),;=|".contains(c)) {
        let word = word.trim_start_matches("./");
        if !REPO_PREFIXES.iter().any(|p| word.starts_with(p)) {
            continue;
        }
        let path = word.split("::").next().unwrap_or(word);
        let path = match path.find(':') {
            Some(i) => &path[..i],
            None => path,
        };
        let path = path.trim_end_matches(['.', ',', ':']);
        if !is_placeholder(path) {
            paths.push(path.to_string());
        }
    }
    paths
}

/// The test a `cargo test ... --test it FILTER` names: FILTER (a path of modules, maybe a
/// function) must lead through tests/it/ to a module file, and what is left of it must be a
/// `fn` or `mod` of that file.
fn test_filter_exists(root: &Path, base: &str, filter: &str) -> bool {
    let parts: Vec<&str> = filter
        .trim_end_matches("::")
        .split("::")
        .filter(|p| !p.is_empty())
        .collect();
    let mut dir = root.join(base);
    let mut file = dir.join("main.rs");
    let mut i = 0;
    while i < parts.len() {
        let as_file = dir.join(format!("{}.rs", parts[i]));
        let as_dir = dir.join(parts[i]).join("mod.rs");
        if as_file.exists() {
            file = as_file;
        } else if as_dir.exists() {
            file = as_dir;
        } else {
            break;
        }
        dir = dir.join(parts[i]);
        i += 1;
    }
    if i == 0 {
        return false;
    }
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    parts[i..]
        .iter()
        .all(|name| text.contains(&format!("fn {name}")) || text.contains(&format!("mod {name}")))
}

/// The `--flags` a command line gives fle-chaos or fle-node (what follows the program's name,
/// or `cargo run ... --`), up to the end of that command (`|`, `;`, `&&`, `#`).
fn program_flags(code: &str) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let mut program: Option<&'static str> = None;
    let mut prev = "";
    for raw in code.split_whitespace() {
        if matches!(raw, "|" | ";" | "&&" | "||") || raw.starts_with('#') || raw.ends_with(';') {
            program = None;
            continue;
        }
        let word = raw.trim_matches(|c: char| "`()[],'\"".contains(c));
        // `cargo ... -p fle-node`: a package named, not the program run.
        if matches!(
            std::mem::replace(&mut prev, word),
            "-p" | "--package" | "--bin"
        ) {
            continue;
        }
        match word.rsplit('/').next().unwrap_or(word) {
            "fle-chaos" => program = Some("fle-chaos"),
            "fle-node" => program = Some("fle-node"),
            // `cargo run --release -- ARGS`: the ARGS are fle-chaos's.
            "--" if code.contains("cargo run") => program = Some("fle-chaos"),
            _ => {
                if let (Some(p), Some(flag)) = (program, flag_of(word)) {
                    found.push((p, flag));
                }
            }
        }
    }
    found
}

/// `--name` of a word such as `--name`, `--name=value` or `(--name,`; None for anything else.
fn flag_of(word: &str) -> Option<String> {
    let w = word.trim_start_matches(['(', '[', '"', '\'']);
    let rest = w.strip_prefix("--")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let name = name.trim_end_matches('-');
    (!name.is_empty() && name.starts_with(|c: char| c.is_ascii_alphabetic()))
        .then(|| format!("--{name}"))
}

impl Ctx {
    /// A flag of either program: a doc line may name both, and what matters is that the
    /// flag is real. When fle-node is not built, only flags said of fle-chaos are checked.
    fn knows(&self, program: &str, flag: &str) -> bool {
        self.chaos_flags.contains(flag)
            || match &self.node_flags {
                Some(node) => node.contains(flag),
                None => program == "fle-node",
            }
    }

    /// Every problem of one page (`file` relative to the repository).
    fn check_page(&self, file: &str, text: &str) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut push = |line: usize, kind: Kind, what: String| {
            problems.push(Problem {
                file: file.to_string(),
                line,
                kind,
                what,
            })
        };
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        let mut in_block = false;
        // Under a heading that lists test modules: the folder of their test binary.
        let mut modules_of: Option<&str> = None;
        // A code block's command continued with `\` on the next line.
        let mut command = String::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let width = line.chars().count();
            if width > MAX_LINE {
                push(
                    n,
                    Kind::LongLine,
                    format!(
                        "{width} characters (at most {MAX_LINE}): wrap it (a table into a list, \
                         a command with `\\`)"
                    ),
                );
            }
            if file != DATED_PAGE {
                for date in dates(line) {
                    if !ALLOWED_DATES.contains(&date.as_str()) {
                        push(
                            n,
                            Kind::Date,
                            format!(
                                "date {date}: state the fact without it; dated figures go to \
                                 {DATED_PAGE}'s history"
                            ),
                        );
                    }
                }
                if !in_block {
                    for time in times_of_day(line) {
                        push(
                            n,
                            Kind::TimeOfDay,
                            format!(
                                "time of day {time}: a journal's; drop it (dated figures go to \
                                 {DATED_PAGE}'s history)"
                            ),
                        );
                    }
                }
            }
            for r in issue_refs(line) {
                push(
                    n,
                    Kind::IssueRef,
                    format!("\"{r}\": name the feature, not the issue (readers cannot see it)"),
                );
            }
            if let Some(heading) = line.strip_prefix("### ") {
                modules_of = match heading {
                    h if h.contains("node's test modules") => Some("node/tests/it"),
                    h if h.contains("controller's test modules") => Some("tests/it"),
                    _ => None,
                };
            } else if line.starts_with('#') {
                modules_of = None;
            }
            if let Some(base) = modules_of {
                for module in listed_modules(line) {
                    if !test_filter_exists(&self.root, base, &module) {
                        push(
                            n,
                            Kind::TestFilter,
                            format!("test module {module}: no such module under {base}/"),
                        );
                    }
                }
            }
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                command.clear();
                continue;
            }
            if !in_block {
                for target in link_targets(line) {
                    if let Some(why) = self.bad_link(dir, &target) {
                        push(n, Kind::Link, format!("link {target}: {why}"));
                    }
                }
            }
            // Code: the whole line in a block, the inline spans elsewhere.
            let codes: Vec<String> = if in_block {
                command.push_str(line.trim_end().trim_end_matches('\\'));
                command.push(' ');
                if line.trim_end().ends_with('\\') {
                    vec![]
                } else {
                    vec![std::mem::take(&mut command)]
                }
            } else {
                code_spans(line).into_iter().map(str::to_string).collect()
            };
            for code in &codes {
                for path in repo_paths(code) {
                    if !self.root.join(&path).exists() {
                        push(
                            n,
                            Kind::Path,
                            format!("{path} does not exist: name the path as it is now"),
                        );
                    }
                }
                for (base, filter) in test_filters(code) {
                    if !test_filter_exists(&self.root, base, &filter) {
                        push(
                            n,
                            Kind::TestFilter,
                            format!("test filter {filter}: no such module or test under {base}/"),
                        );
                    }
                }
                let mut flags = program_flags(code);
                // A span of flags alone (`--replay RUN_DIR`) is fle-chaos's, or fle-node's on
                // a line about fle-node only.
                if !in_block && code.trim_start().starts_with("--") {
                    let program = if line.contains("fle-node") && !line.contains("fle-chaos") {
                        "fle-node"
                    } else {
                        "fle-chaos"
                    };
                    let words = code.split_whitespace().filter_map(flag_of);
                    flags.extend(words.map(|f| (program, f)));
                }
                for (program, flag) in flags {
                    if !self.knows(program, &flag)
                        && !OTHER_TOOLS_FLAGS.contains(&flag.as_str())
                        && !is_alias_said_with_its_name(line, &flag)
                    {
                        push(
                            n,
                            Kind::Flag,
                            format!("{program} has no flag {flag} (see {program} --help)"),
                        );
                    }
                }
            }
            // Prose on a line about fle-chaos or fle-node: a bare `--flag` is theirs.
            if !in_block && (line.contains("fle-chaos") || line.contains("fle-node")) {
                let program = if line.contains("fle-chaos") {
                    "fle-chaos"
                } else {
                    "fle-node"
                };
                for flag in prose(line).split_whitespace().filter_map(flag_of) {
                    if !self.knows(program, &flag)
                        && !OTHER_TOOLS_FLAGS.contains(&flag.as_str())
                        && !is_alias_said_with_its_name(line, &flag)
                    {
                        push(
                            n,
                            Kind::Flag,
                            format!("{program} has no flag {flag} (see {program} --help)"),
                        );
                    }
                }
            }
        }
        problems
    }

    fn bad_link(&self, dir: &Path, target: &str) -> Option<String> {
        let scheme = target.split_once(':').map(|(s, _)| s);
        if scheme.is_some_and(|s| s.chars().all(|c| c.is_ascii_alphabetic())) {
            return None;
        }
        let path = target.split('#').next().unwrap_or("");
        if path.is_empty() {
            return None;
        }
        let full = self.root.join(dir).join(path);
        let Ok(real) = full.canonicalize() else {
            return Some("no such file in the repository".to_string());
        };
        let root = self.root.canonicalize().unwrap();
        (!real.starts_with(&root)).then(|| "leaves the repository".to_string())
    }
}

/// Flags of other tools that a doc names as a bare `--flag`: cargo's, and iptables' NFQUEUE
/// `--queue-bypass` (the packet fault's rule).
const OTHER_TOOLS_FLAGS: &[&str] = &["--release", "--test", "--bench", "--queue-bypass"];

/// Old names fle-chaos still accepts as hidden aliases (`alias = ...` in its clap structs), with
/// the current name: a doc may say the old one only on a line that names the current one too.
const HIDDEN_ALIASES: &[(&str, &str)] = &[("--runs", "--test-count"), ("--dir", "--out")];

/// An old flag name on a line that gives its current name too ("`--runs` still works").
fn is_alias_said_with_its_name(line: &str, flag: &str) -> bool {
    HIDDEN_ALIASES
        .iter()
        .any(|(old, new)| *old == flag && line.contains(new))
}

/// The filters of `cargo test ... --test it FILTER` in a piece of code, each with the folder of
/// its test binary (the node's with `-p fle-node`).
fn test_filters(code: &str) -> Vec<(&'static str, String)> {
    let words: Vec<&str> = code.split_whitespace().collect();
    let base = if code.contains("-p fle-node") {
        "node/tests/it"
    } else {
        "tests/it"
    };
    let mut filters = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if *w == "--test" && words.get(i + 1) == Some(&"it") {
            for f in &words[i + 2..] {
                if matches!(*f, "|" | ";" | "&&" | "#") || f.starts_with('#') {
                    break;
                }
                if !f.starts_with('-') && f.contains("::") && !is_placeholder(f) {
                    filters.push((base, f.trim_matches('`').to_string()));
                }
            }
        }
    }
    filters
}

/// The modules a list item of docs/testing.md names first: "- `a::b`, `c` (root): ...".
fn listed_modules(line: &str) -> Vec<String> {
    let Some(mut rest) = line.strip_prefix("- ") else {
        return Vec::new();
    };
    let mut names = Vec::new();
    while let Some(after) = rest.strip_prefix('`') {
        let Some(end) = after.find('`') else { break };
        names.push(after[..end].to_string());
        rest = after[end + 1..].trim_start_matches([',', ' ']);
    }
    names
}

#[test]
fn docs_say_what_is() {
    let ctx = context();
    let mut problems = Vec::new();
    for page in doc_pages(&ctx.root) {
        let text = std::fs::read_to_string(ctx.root.join(&page)).unwrap();
        problems.extend(ctx.check_page(&page, &text));
    }
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(
        problems.is_empty(),
        "{} problems in the docs:\n{}",
        problems.len(),
        list.join("\n")
    );
}

#[test]
fn checks_catch_drift() {
    let ctx = Ctx {
        root: repo_root(),
        chaos_flags: ["--nodes", "--replay", "--out"].map(String::from).into(),
        node_flags: Some(["--config", "--bug"].map(String::from).into()),
    };
    let long = "x".repeat(MAX_LINE + 1);
    let bad = format!(
        "# A page\n\
         {long}\n\
         Measured on 2026-12-05 at noon.\n\
         Added by issue 12, fixed in issue #13 and #14.\n\
         See [the notes](../shared/notes.md) and [gone](missing.md).\n\
         The checker is `src/checker/no_such_checker.rs:12`, tested by `tests/it/nowhere.rs`.\n\
         Run `cargo test --release --test it nowhere::at_all`.\n\
         ```sh\n\
         fle-chaos test --nodes 3 \\\n  --no-such-flag 4 --out reports\n\
         ```\n\
         Or `fle-chaos test --also-missing` and `--nodes 5`.\n\
         Then fle-node's `--bogus`.\n\
         ### The controller's test modules\n\
         - `run::replay`, `run::no_such_module` (root): replays.\n\
         Measured (06:28-06:57 UTC), again 22:08 UTC, and 12:36\u{2013}12:39.\n"
    );
    let problems = ctx.check_page("docs/bad.md", &bad);
    let kinds: Vec<(usize, Kind)> = problems.iter().map(|p| (p.line, p.kind)).collect();
    let expected = [
        (2, Kind::LongLine),
        (3, Kind::Date),
        (4, Kind::IssueRef),
        (4, Kind::IssueRef),
        (4, Kind::IssueRef),
        (5, Kind::Link),
        (5, Kind::Link),
        (6, Kind::Path),
        (6, Kind::Path),
        (7, Kind::TestFilter),
        (10, Kind::Flag),
        (12, Kind::Flag),
        (13, Kind::Flag),
        (15, Kind::TestFilter),
        (16, Kind::TimeOfDay),
        (16, Kind::TimeOfDay),
        (16, Kind::TimeOfDay),
    ];
    assert_eq!(kinds, expected, "{problems:#?}");
    let named: Vec<String> = problems.iter().map(ToString::to_string).collect();
    for (i, needle) in [
        "docs/bad.md:2: 121 characters",
        "date 2026-12-05",
        "\"issue 12",
        "\"#14",
        "link ../shared/notes.md",
        "link missing.md",
        "src/checker/no_such_checker.rs does not exist",
        "tests/it/nowhere.rs does not exist",
        "nowhere::at_all",
        "fle-chaos has no flag --no-such-flag",
        "fle-chaos has no flag --also-missing",
        "fle-node has no flag --bogus",
        "test module run::no_such_module",
        "time of day 06:28-06:57",
        "time of day 22:08",
        "time of day 12:36\u{2013}12:39",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            named.iter().any(|p| p.contains(needle)),
            "check {i} did not report {needle:?}:\n{}",
            named.join("\n")
        );
    }

    // What is right passes: real paths with suffixes, real links, a real test filter, the
    // flags of other tools, ZooKeeper's JIRA ids, a table's `|`.
    let good = "# A page\n\
         See [running](running.md) and [the readme](../README.md#quick-start).\n\
         `src/checker/crash.rs:40`, `src/checker/registry.rs::CHECKERS`, `nemesis/NAME.toml`.\n\
         ZOOKEEPER-2846; `cargo test --release --test it docs::checks_catch_drift`.\n\
         `cargo test --release -p fle-node --test it zab::kill -- --ignored`.\n\
         ### The node's test modules\n\
         - `zab::process`, `cluster`: real processes.\n\
         ```sh\n\
         cargo run --release -- test --nodes 3   # a comment --with-dashes\n\
         iptables -A INPUT --dport 2888 -j DROP\n\
         ```\n\
         `fle-chaos test --replay RUN_DIR --out reports`; fle-node takes `--config FILE`.\n\
         n4's log at 18:23:37.522 names 10.0.0.5:2888 and 127.0.0.1:8081; a 3:10 ratio, 2 a.m. UTC.\n";
    let problems = ctx.check_page("docs/good.md", good);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// `fle-chaos --help` names every fault kind (it is built from `FaultKind::ALL`, which a stale
/// hand-written list once was not).
#[test]
fn the_help_names_every_fault_kind() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fle-chaos"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for kind in fle_chaos::history::FaultKind::ALL {
        assert!(
            help.contains(kind.name()),
            "{} missing from:\n{help}",
            kind.name()
        );
    }
}
