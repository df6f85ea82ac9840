//! `report.html`: one self-contained page per run (inline CSS, SVG and JS, plots as `data:`
//! URIs, no network): verdict banner, an account paragraph per invalid checker (`account`)
//! with its first violation zoomed, settings and seed with the replay command, each checker's
//! verdict and explanation, its evidence as rows linked to the history (`evidence`), stale
//! leaders, leaderless windows and overlaps as tables (`tables`), the situations the faults
//! met (`coverage`), the interactive timeline
//! (`interactive`), the plots, the recovery and fault-schedule tables, and the head of the
//! history with links to the whole JSONL and to every node's logs.

use super::plot::Plot;
use super::recovery;
use super::scan::RunData;
use super::text::{base64, escape, shorten};
use crate::checker::{CheckResult, Results, Validity};
use crate::duration::{moment, span};
use crate::history;
use crate::history::test_info::TestInfo;
use std::fmt::Write;
use std::path::Path;

/// Everything the page shows.
pub struct Page<'a> {
    pub run_dir: &'a Path,
    pub info: &'a TestInfo,
    pub results: Option<&'a Results>,
    pub data: &'a RunData,
    pub plots: &'a [Plot],
    /// Each invalid checker's first violation, zoomed.
    pub zooms: &'a [Plot],
}

pub fn verdict_word(v: Option<Validity>) -> &'static str {
    match v {
        Some(v) => v.word(),
        None => "not checked",
    }
}

/// The CSS class of one checker's verdict: grey `na` when it does not apply to the run.
pub fn checker_class(c: &CheckResult) -> &'static str {
    if c.applicable {
        verdict_class(Some(c.valid))
    } else {
        "na"
    }
}

/// The CSS class, and so the color, of a verdict.
pub fn verdict_class(v: Option<Validity>) -> &'static str {
    match v {
        Some(Validity::True) => "valid",
        Some(Validity::False) => "invalid",
        _ => "unknown",
    }
}

pub const CSS: &str = "
body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:0 16px 40px}
h1{margin:0;font-size:28px} h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.banner{padding:18px 24px;color:#fff}
.banner.valid{background:#2e7d32}.banner.invalid{background:#c62828}.banner.unknown{background:#ef6c00}
.banner .sub{opacity:.9;margin-top:6px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:14px}
th,td{border:1px solid #ddd;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td.valid{color:#2e7d32;font-weight:bold}td.invalid{color:#c62828;font-weight:bold}
td.unknown{color:#ef6c00;font-weight:bold}td.na{color:#777}td.never{background:#f4f4f4}
pre{background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;font-size:12px;max-height:480px}
code{background:#eee;padding:1px 4px}
figure{margin:16px 0;background:#fff;border:1px solid #ddd;padding:8px}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:13px;color:#555;margin-top:4px}
.note{color:#8a6d3b}
.account{background:#fff;border:1px solid #ddd;border-left:6px solid #c62828;padding:10px 14px;line-height:1.45}
table.evidence td:first-child{white-space:nowrap}
h3{margin-bottom:4px}
";

/// Folds long JSON (evidence, nemesis values) inside table cells, so that no cell pushes the
/// page wider than a 1280 px window. Its own constant so a test can show the page without it.
pub const FOLD_CSS: &str = "td pre,td code{white-space:pre-wrap;overflow-wrap:anywhere}";

pub fn report_html(p: &Page) -> String {
    let verdict = p.results.map(|r| r.valid);
    let mut h = String::with_capacity(1 << 20);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{} — {}</title><style>{CSS}{FOLD_CSS}{}</style></head>\n<body>\n",
        escape(&p.info.name),
        verdict_word(verdict),
        super::interactive::CSS
    );
    banner(&mut h, p, verdict);
    h += "<main>\n";
    accounts(&mut h, p);
    h += &super::window::section(p.results);
    settings(&mut h, p.info);
    checkers(&mut h, p.results);
    evidence_rows(&mut h, p);
    h += &super::coverage::section(p.results);
    h += &super::tables::leadership(p.results);
    h += &super::interactive::section(p.data, &p.data.violations);
    plots(&mut h, "plots", "Plots", p.plots);
    recoveries(&mut h, p);
    schedule(&mut h, p.data);
    history(&mut h, p);
    h += "</main>\n";
    // Lets a headless browser (and a curious reader) confirm every plot decoded and that
    // nothing made the page wider than the window (long JSON in a table cell once did).
    h += "<script>window.addEventListener('load',function(){var i=document.querySelectorAll('img.plot'),n=0;\
          i.forEach(function(x){if(x.complete&&x.naturalWidth>0)n++;});\
          document.body.setAttribute('data-plots-loaded',n+'/'+i.length);\
          document.body.setAttribute('data-page-width',document.documentElement.scrollWidth);});</script>\n";
    h += "</body></html>\n";
    h
}

fn banner(h: &mut String, p: &Page, verdict: Option<Validity>) {
    let names = |keep: fn(&CheckResult) -> bool| -> Vec<&str> {
        p.results
            .map(|r| {
                r.checkers
                    .iter()
                    .filter(|c| keep(c))
                    .map(|c| c.name.as_str())
                    .collect()
            })
            .unwrap_or_default()
    };
    let failing = names(|c| c.applicable && c.valid != Validity::True);
    let not_applicable = names(|c| !c.applicable);
    let mut detail = match (p.results, failing.is_empty()) {
        (None, _) => "no results.json: the checkers have not run on this history".to_string(),
        (Some(r), true) => format!(
            "all {} checkers that apply passed",
            r.checkers.len() - not_applicable.len()
        ),
        (Some(_), false) => format!("not passed: {}", failing.join(", ")),
    };
    if !not_applicable.is_empty() {
        detail += &format!(
            " · {}: {}",
            crate::checker::NOT_APPLICABLE,
            not_applicable.join(", ")
        );
    }
    if let Some(why) = p.results.and_then(|r| r.coverage.as_ref()?.thin()) {
        detail += &format!(" · thin coverage: {why}");
    }
    for k in p.results.map(|r| r.known.as_slice()).unwrap_or_default() {
        detail += &format!(" · known: {k}");
    }
    for r in p
        .results
        .map(|r| r.resembles.as_slice())
        .unwrap_or_default()
    {
        detail += &format!(" · resembles: {r}");
    }
    let word = match p.results {
        Some(r) => r.verdict_words(),
        None => verdict_word(verdict).to_string(),
    };
    let _ = writeln!(
        h,
        "<header class=\"banner {}\" id=\"verdict\"><h1>{} — {}</h1>\
         <div class=\"sub\">{} · started {} · {} nodes · {} of history, {} events</div></header>",
        verdict_class(verdict),
        escape(&word.to_uppercase()),
        escape(&p.info.name),
        escape(&detail),
        p.info.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        p.info.nodes.len(),
        span(p.data.t_end_ns as f64 / 1e9),
        p.data.events
    );
}

fn settings(h: &mut String, info: &TestInfo) {
    h.push_str("<h2 id=\"settings\">Settings</h2>\n<table>\n");
    let software = super::junit::reported_versions(info);
    let zookeeper: Vec<String> = (info.settings.zookeeper_config.iter())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let rows = [
        (
            "target",
            match software.is_empty() {
                true => info.target.clone(),
                false => format!("{} (the servers report {software})", info.target),
            },
        ),
        ("nodes", info.nodes.join(", ")),
        (
            "observers",
            match info.observers.is_empty() {
                true => "none".into(),
                false => info.observers.join(", ") + " (never counted toward a quorum)",
            },
        ),
        ("workload", info.workload.clone()),
        (
            "nemesis",
            if info.nemesis.is_empty() {
                "none".into()
            } else {
                info.nemesis.join(", ")
            },
        ),
        ("seed", info.seed.to_string()),
        ("time limit", format!("{} s", info.time_limit_s)),
        (
            "timing",
            format!(
                "tickTime {} ms, initLimit {}, syncLimit {}",
                info.tick_ms, info.init_limit, info.sync_limit
            ),
        ),
        ("started", info.started_at.to_rfc3339()),
        ("fle-chaos", info.version.clone()),
    ];
    for (k, v) in rows {
        let _ = writeln!(h, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    if !zookeeper.is_empty() {
        let _ = writeln!(
            h,
            "<tr><th>ZooKeeper settings</th><td>{}</td></tr>",
            escape(&zookeeper.join(", "))
        );
    }
    h.push_str(
        "</table>\n<p>Replay this run (the same settings, the same faults at the same times on \
         the same nodes):</p>\n",
    );
    let _ = writeln!(
        h,
        "<pre id=\"replay\">{}</pre>",
        escape(&info.replay_command)
    );
    if !info.settings.is_empty() {
        let text = serde_json::to_string_pretty(&info.settings).unwrap_or_default();
        let _ = writeln!(
            h,
            "<details><summary>All settings</summary><pre>{}</pre></details>",
            escape(&text)
        );
    }
}

fn checkers(h: &mut String, results: Option<&Results>) {
    h.push_str("<h2>Checkers</h2>\n");
    let Some(results) = results else {
        h.push_str(
            "<p class=\"note\" id=\"checkers\">No results.json in this run folder: run \
             <code>fle-chaos check RUN_DIR</code>, then <code>fle-chaos report RUN_DIR</code>.</p>\n",
        );
        return;
    };
    h.push_str(
        "<table id=\"checkers\"><tr><th>checker</th><th>verdict</th><th>explanation</th>\
         <th>evidence</th></tr>\n",
    );
    for c in &results.checkers {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.name),
            checker_class(c),
            c.shown(),
            escape(&c.explanation),
            evidence(c)
        );
    }
    h.push_str("</table>\n");
}

/// The evidence cell: a link to the checker's rows, and measurements folded (those shown as
/// tables elsewhere too, the full JSON stays here).
fn evidence(c: &CheckResult) -> String {
    let mut out = String::new();
    if !c.evidence.is_empty() {
        let _ = write!(
            out,
            "<a href=\"#evidence-{}\">{} item(s)</a>",
            escape(&c.name),
            c.evidence.len()
        );
    }
    if !c.measurements.is_none() {
        let text = serde_json::to_string_pretty(&c.measurements).unwrap_or_default();
        let _ = write!(
            out,
            "<details><summary>measurements</summary><pre>{}</pre></details>",
            escape(&shorten(&text, 6_000))
        );
    }
    if out.is_empty() {
        out.push('—');
    }
    out
}

/// One paragraph per invalid checker, then its first violation zoomed.
fn accounts(h: &mut String, p: &Page) {
    let Some(results) = p.results else { return };
    let paragraphs: String = results
        .checkers
        .iter()
        .map(|c| {
            super::account::paragraph(
                c,
                &p.data.moments,
                &p.data.leader_changes,
                &p.info.observers,
            )
        })
        .collect();
    if paragraphs.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"what-went-wrong\">What went wrong</h2>\n");
    h.push_str(&paragraphs);
    plots(h, "zooms", "First violations, zoomed", p.zooms);
}

/// Each checker's evidence as rows (open for the ones that did not pass).
fn evidence_rows(h: &mut String, p: &Page) {
    let Some(results) = p.results else { return };
    if results.checkers.iter().all(|c| c.evidence.is_empty()) {
        return;
    }
    h.push_str(
        "<h2 id=\"evidence\">Evidence</h2>\n<p>Each event links to the history view at that \
         event (open the report under <code>fle-chaos serve</code>; from disk, the row says the \
         history's line).</p>\n",
    );
    for c in results.checkers.iter().filter(|c| !c.evidence.is_empty()) {
        let _ = writeln!(
            h,
            "<details{}><summary><b>{}</b> ({}): {} item(s)</summary>{}</details>",
            if c.valid == Validity::True {
                ""
            } else {
                " open"
            },
            escape(&c.name),
            c.shown(),
            c.evidence.len(),
            super::evidence::table(c, &p.data.moments)
        );
    }
}

fn plots(h: &mut String, id: &str, heading: &str, plots: &[Plot]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(h, "<h2 id=\"{id}\">{heading}</h2>");
    for p in plots {
        let file = |path: &Path| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let _ = write!(
            h,
            "<figure id=\"plot-{}\"><img class=\"plot\" alt=\"{}\" width=\"{}\" height=\"{}\" \
             src=\"data:image/png;base64,{}\"><figcaption>{} · <a href=\"{}\">PNG</a> · \
             <a href=\"{}\">SVG</a>",
            p.name,
            escape(&p.title),
            p.width,
            p.height,
            base64(&p.png_bytes),
            escape(&p.title),
            escape(&file(&p.png)),
            escape(&file(&p.svg))
        );
        if let Some(note) = &p.note {
            let _ = write!(h, " · <span class=\"note\">{}</span>", escape(note));
        }
        h.push_str("</figcaption></figure>\n");
    }
}

fn recoveries(h: &mut String, p: &Page) {
    h.push_str("<h2 id=\"recovery\">Recovery after each fault</h2>\n");
    if p.data.recoveries.is_empty() {
        h.push_str("<p>No faults took effect in this run.</p>\n");
        return;
    }
    let _ = writeln!(
        h,
        "<p>Source: the recovery checker's definition, over the history it judged. Recovery \
         is the time from the fault to the first quorum-backed leader read after it: a node \
         leading an epoch it has established, followed in broadcast by a quorum, none of them \
         cut off from it, killed or paused.</p>"
    );
    h.push_str(
        "<table><tr><th>fault at</th><th>kind</th><th>nodes</th>\
         <th>time to a quorum-backed leader</th><th>leader then</th></tr>\n",
    );
    for r in &p.data.recoveries {
        let leader = match (&r.leader, r.epoch) {
            (Some(l), Some(e)) => format!("{l} (epoch {e})"),
            (Some(l), None) => l.clone(),
            _ => "—".into(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            moment(r.start_ns),
            r.kind.name(),
            escape(&r.nodes.join(", ")),
            recovery::seconds(r)
                .map(|s| format!("{s:.3} s"))
                .unwrap_or_else(|| "none before the run ended".into()),
            escape(&leader)
        );
    }
    h.push_str("</table>\n");
}

fn schedule(h: &mut String, data: &RunData) {
    h.push_str("<h2>Fault schedule</h2>\n");
    if data.schedule.is_empty() {
        h.push_str("<p id=\"schedule\">The nemesis did nothing in this run.</p>\n");
        return;
    }
    h.push_str(
        "<table id=\"schedule\"><tr><th>invoked</th><th>done</th><th>action</th><th>outcome</th>\
         <th>nodes</th><th>what was done</th></tr>\n",
    );
    for r in &data.schedule {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            r.invoke_ns.map_or_else(|| "—".into(), moment),
            moment(r.done_ns),
            escape(&r.action),
            match r.outcome {
                crate::history::EventType::Info => "done",
                crate::history::EventType::Fail => "failed",
                crate::history::EventType::Ok => "ok",
                crate::history::EventType::Invoke => "invoked",
            },
            escape(&r.nodes.join(", ")),
            escape(&r.detail)
        );
    }
    h.push_str("</table>\n");
}

fn history(h: &mut String, p: &Page) {
    h.push_str("<h2 id=\"history\">History</h2>\n<p>");
    for (file, what) in [
        (
            history::file::WRITTEN,
            "the whole history (JSON lines as zstd frames: zstdcat prints it; under serve, \
             history.jsonl is its text)",
        ),
        (history::file::PLAIN, "the whole history (JSON lines)"),
        (crate::store::RESULTS, "checker results"),
        (history::test_info::TestInfo::FILE, "settings"),
        (crate::store::CONTROLLER_LOG, "controller log"),
    ] {
        if p.run_dir.join(file).is_file() {
            let _ = write!(h, "<a href=\"{file}\">{file}</a> ({what}) · ");
        }
    }
    h.push_str("</p>\n");
    let logs = node_logs(p.run_dir);
    if !logs.is_empty() {
        h.push_str("<p>Node logs: ");
        let links: Vec<String> = logs
            .iter()
            .map(|l| format!("<a href=\"{0}\">{0}</a>", escape(l)))
            .collect();
        h.push_str(&links.join(" · "));
        h.push_str("</p>\n");
    }
    let _ = writeln!(
        h,
        "<p>First {} of {} events:</p>\n<pre id=\"history-head\">{}</pre>",
        p.data.head.len(),
        p.data.events,
        escape(&p.data.head.join("\n"))
    );
}

/// Relative paths of the files directly inside `nodes/<n>/` (logs; data dirs are skipped).
fn node_logs(run_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(nodes) = std::fs::read_dir(run_dir.join("nodes")) else {
        return out;
    };
    let mut nodes: Vec<_> = nodes.flatten().filter(|e| e.path().is_dir()).collect();
    nodes.sort_by_key(|e| e.file_name());
    for node in nodes {
        let Ok(files) = std::fs::read_dir(node.path()) else {
            continue;
        };
        let mut files: Vec<_> = files.flatten().filter(|e| e.path().is_file()).collect();
        files.sort_by_key(|e| e.file_name());
        for f in files {
            out.push(format!(
                "nodes/{}/{}",
                node.file_name().to_string_lossy(),
                f.file_name().to_string_lossy()
            ));
        }
    }
    out
}
