//! The browser test: Debian's chromium opens a rendered report.html headless (from the file,
//! with networking off), takes a screenshot and dumps the DOM. The page must show the
//! verdict, every plot (decoded by the browser) and the checker table, with no console
//! errors. Chromium is installed when missing and the test runs as root; otherwise the test
//! says it is skipped and why.
//!
//! A second test opens the report of an invalid run (writes acknowledged by a cut-off leader,
//! judged by the real checkers) as `fle-chaos serve` serves it: at 1280x900 it must fit, tell
//! what went wrong in words, mark the violations on the interactive timeline, show a span's
//! hover text, and link into the served history view.
//!
//! `FLC_REPORT_SCREENSHOT=/path/shot.png` keeps a copy of the screenshot to look at.

use crate::support;

use crate::support::report::fixture::{write_run, FixtureSpec};
use crate::support::report::*;
use fle_chaos::report::{self, PLOTS};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WINDOW: (u32, u32) = (1400, 3000);
/// The narrowest window the page must fit without scrolling sideways.
const NARROW: (u32, u32) = (1280, 900);

/// Kills chromium's whole process group if the test ends before chromium does.
struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }
}

fn find_chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Chromium, installed with apt when missing and root; None (skip) when not root.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = find_chromium() {
        return Some(p);
    }
    if unsafe { libc::geteuid() } != 0 {
        crate::support::skip::skip(
            "report_browser",
            "chromium is not installed and installing it needs root (apt-get install chromium)",
        );
        return None;
    }
    // The controller's installer: one apt-get at a time in this process (dpkg has one lock).
    let installed =
        fle_chaos::control::backend::apt::install(&["chromium"], "the browser test", &mut |s| {
            eprintln!("{s}")
        });
    assert!(
        installed.ok,
        "apt-get install chromium failed: {}",
        installed.last_line
    );
    Some(find_chromium().expect("chromium installed but not found in /usr/bin"))
}

/// Runs headless chromium on `page` with `extra` arguments; returns (stdout, stderr).
fn run_chromium(
    chromium: &Path,
    profile: &Path,
    page: &Path,
    window: (u32, u32),
    extra: &[String],
) -> (String, String) {
    run_chromium_url(
        chromium,
        profile,
        &format!("file://{}", page.display()),
        window,
        extra,
    )
}

/// `run_chromium` on any URL.
fn run_chromium_url(
    chromium: &Path,
    profile: &Path,
    url: &str,
    window: (u32, u32),
    extra: &[String],
) -> (String, String) {
    std::fs::create_dir_all(profile).unwrap();
    let out = profile.join("out.txt");
    let err = profile.join("err.txt");
    let child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            &format!("--window-size={},{}", window.0, window.1),
            &format!("--user-data-dir={}", profile.join("profile").display()),
        ])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let mut browser = Browser(child);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        match browser.0.try_wait().unwrap() {
            Some(status) => {
                assert!(
                    status.success(),
                    "chromium failed: {status}\n{}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
                break;
            }
            None if Instant::now() > deadline => panic!("chromium did not finish within 180 s"),
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    (
        std::fs::read_to_string(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap(),
    )
}

/// Lines where the page wrote to the console (errors, uncaught exceptions, failed loads).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

#[test]
fn chromium_shows_the_verdict_the_plots_and_the_checker_table_without_console_errors() {
    let Some(chromium) = chromium() else { return };
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(
        root.path(),
        &FixtureSpec {
            invalid: true,
            ..FixtureSpec::small("browser")
        },
    )
    .unwrap();
    report::render_run(&fx.run_dir).unwrap();
    let page = fx.run_dir.join("report.html");
    let scratch = tempfile::tempdir().unwrap();

    // The console check can fail: a page with an error is caught.
    let bad = scratch.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('flc-marker'); notDefined();</script></body></html>",
    )
    .unwrap();
    let (_, err) = run_chromium(
        &chromium,
        &scratch.path().join("bad"),
        &bad,
        WINDOW,
        &["--dump-dom".into()],
    );
    let caught = console_lines(&err);
    assert!(
        caught.iter().any(|l| l.contains("flc-marker")),
        "console detector missed console.error: {err}"
    );
    assert!(
        caught.iter().any(|l| l.contains("notDefined")),
        "console detector missed an uncaught error"
    );

    // The DOM after load: the verdict, every plot decoded, the checker table.
    let (dom, err) = run_chromium(
        &chromium,
        &scratch.path().join("dom"),
        &page,
        WINDOW,
        &["--dump-dom".into()],
    );
    assert_eq!(
        console_lines(&err),
        Vec::<&str>::new(),
        "console output while loading the report"
    );
    assert!(
        dom.contains("INVALID — browser"),
        "verdict banner missing from the DOM"
    );
    let loaded = format!("data-plots-loaded=\"{0}/{0}\"", PLOTS.len());
    assert!(
        dom.contains(&loaded),
        "not every plot decoded in the browser (want {loaded})"
    );
    let table = dom
        .split("id=\"checkers\"")
        .nth(1)
        .expect("checker table")
        .split("</table>")
        .next()
        .unwrap();
    for (name, _) in &fx.checkers {
        assert!(
            table.contains(&format!("<td>{name}</td>")),
            "checker {name} not in the table"
        );
    }
    assert!(table.contains("class=\"invalid\">invalid"));

    // At 1280 px nothing pushes the page sideways: the checkers' evidence and the schedule's
    // partition values are long JSON, which must fold inside their cells. The check can fail:
    // the same page without the folding rule is wider than the window.
    let width_at_1280 = |page: &Path, profile: &str| -> u32 {
        let (dom, _) = run_chromium(
            &chromium,
            &scratch.path().join(profile),
            page,
            NARROW,
            &["--dump-dom".into()],
        );
        dom.split("data-page-width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .expect("the page records its width on load")
    };
    let width = width_at_1280(&page, "narrow");
    assert!(
        width <= NARROW.0,
        "at {} px the page is {width} px wide: something does not fold",
        NARROW.0
    );
    // With every folded section opened (the evidence rows' raw JSON, measurements) it still
    // fits; without the folding rule it does not.
    let html = std::fs::read_to_string(&page)
        .unwrap()
        .replace("<details>", "<details open>");
    let opened = scratch.path().join("opened.html");
    std::fs::write(&opened, &html).unwrap();
    let width = width_at_1280(&opened, "opened");
    assert!(
        width <= NARROW.0,
        "at {} px the page with its details open is {width} px wide",
        NARROW.0
    );
    let unfolded = scratch.path().join("unfolded.html");
    assert!(html.contains(report::html::FOLD_CSS));
    std::fs::write(&unfolded, html.replace(report::html::FOLD_CSS, "")).unwrap();
    let wide = width_at_1280(&unfolded, "unfolded");
    assert!(
        wide > NARROW.0,
        "without the folding rule the page is still {wide} px: the width check proves nothing"
    );

    // The screenshot: the red banner on top, the timeline's lane colors below it.
    let shot = scratch.path().join("shot.png");
    let (_, err) = run_chromium(
        &chromium,
        &scratch.path().join("shot"),
        &page,
        WINDOW,
        &[format!("--screenshot={}", shot.display())],
    );
    assert_eq!(
        console_lines(&err),
        Vec::<&str>::new(),
        "console output while taking the screenshot"
    );
    if let Ok(keep) = std::env::var("FLC_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    let (w, h, pixels) = read_png(&shot);
    assert_eq!((w, h), WINDOW);
    let banner = &pixels[..(w * 60) as usize];
    assert!(
        count_near(banner, [198, 40, 40]) > (w * 30) as usize,
        "no red INVALID banner at the top"
    );
    // The timeline plot was painted: its LEADING and FOLLOWING lanes show in the page.
    assert!(
        count_near(&pixels, [44, 160, 44]) > 2_000,
        "no LEADING lanes on screen"
    );
    assert!(
        count_near(&pixels, [31, 119, 180]) > 10_000,
        "no FOLLOWING lanes on screen"
    );
    assert!(distinct_colors(&pixels) > 200, "the screenshot looks blank");
}

/// The value of attribute `name` on the body, as the page (or the probe) set it on load.
fn body_attr(dom: &str, name: &str) -> Option<String> {
    let body = dom.split("<body").nth(1)?.split('>').next()?;
    let v = body
        .split(&format!("{name}=\""))
        .nth(1)?
        .split('"')
        .next()?;
    Some(v.replace("&amp;", "&").replace("&quot;", "\""))
}

/// Appended to a copy of the page: hovers the first span of the interactive timeline (the
/// page's own handler fills the hover line), and records what a reader would see.
const PROBE: &str = "<script>window.addEventListener('load',function(){\
var b=document.body,s=document.querySelector('#tl-svg rect.span');\
if(s)s.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}));\
b.setAttribute('data-tip',document.getElementById('tl-tip').textContent);\
b.setAttribute('data-markers',document.querySelectorAll('#tl-svg line.violation').length);\
var a=document.querySelector('a.ev');b.setAttribute('data-link',a?a.href:'');\
var p=document.querySelector('p.account');b.setAttribute('data-account',p?p.textContent:'');\
b.setAttribute('data-width',document.documentElement.scrollWidth);});</script>";

#[test]
fn chromium_shows_what_went_wrong_in_an_invalid_run_served_by_serve() {
    let Some(chromium) = chromium() else { return };
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(
        root.path(),
        &FixtureSpec {
            lose_writes: true,
            real_checkers: true,
            ..FixtureSpec::small("lost")
        },
    )
    .unwrap();
    assert!(
        fx.checkers
            .iter()
            .any(|(n, v)| n == "durability" && *v == fle_chaos::checker::Validity::False),
        "the fixture's lost writes were not caught: {:?}",
        fx.checkers
    );
    report::render_run(&fx.run_dir).unwrap();
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    std::fs::write(
        fx.run_dir.join("probe.html"),
        html.replace("</body>", &format!("{PROBE}</body>")),
    )
    .unwrap();
    let rel = fx
        .run_dir
        .strip_prefix(root.path())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (_server, addr) = serve(root.path());
    let scratch = tempfile::tempdir().unwrap();
    let (dom, err) = run_chromium_url(
        &chromium,
        &scratch.path().join("probe"),
        &format!("http://{addr}/{rel}/probe.html"),
        NARROW,
        &["--dump-dom".into()],
    );
    assert_eq!(
        console_lines(&err),
        Vec::<&str>::new(),
        "console output while loading the invalid run's report"
    );
    let width: u32 = body_attr(&dom, "data-width")
        .and_then(|w| w.parse().ok())
        .expect("the probe recorded the page width");
    assert!(
        width <= NARROW.0,
        "at {} px the page is {width} px wide",
        NARROW.0
    );
    // And from 1024 px on.
    let (dom1024, _) = run_chromium(
        &chromium,
        &scratch.path().join("w1024"),
        &fx.run_dir.join("probe.html"),
        (1024, 900),
        &["--dump-dom".into()],
    );
    let width: u32 = body_attr(&dom1024, "data-width")
        .and_then(|w| w.parse().ok())
        .expect("the probe recorded the page width");
    assert!(width <= 1024, "at 1024 px the page is {width} px wide");

    // The account: what, who, when, under which fault.
    let account = body_attr(&dom, "data-account").expect("probe ran");
    for words in [
        "durability",
        "Lost write",
        "acknowledged by n",
        "without a quorum behind it",
        "partition",
        "cut off from",
    ] {
        assert!(
            account.contains(words),
            "account lacks {words:?}: {account}"
        );
    }

    // Violation markers on the timeline, hover text on a span.
    let markers: usize = body_attr(&dom, "data-markers").unwrap().parse().unwrap();
    assert!(markers > 0, "no violation markers in the timeline SVG");
    let tip = body_attr(&dom, "data-tip").unwrap();
    assert!(
        tip.starts_with('n') && tip.contains("epoch") && tip.contains("read from"),
        "hovering a span did not show its state: {tip:?}"
    );

    // The first evidence link opens the served history view at that event.
    let link = body_attr(&dom, "data-link").unwrap();
    let path = link
        .strip_prefix(&format!("http://{addr}"))
        .unwrap_or_else(|| panic!("evidence link not into the served run: {link}"));
    let index: u64 = path
        .split("around=")
        .nth(1)
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("evidence link names no index: {link}"));
    let (status, ctype, body) = support::report::http_get(&addr, path);
    assert_eq!((status, ctype.as_str()), (200, "text/html; charset=utf-8"));
    let view = String::from_utf8(body).unwrap();
    let row = view
        .split(&format!("<tr class=\"hl\" id=\"ev-{index}\">"))
        .nth(1)
        .unwrap_or_else(|| panic!("history view does not show index {index}"))
        .split("</tr>")
        .next()
        .unwrap();
    assert!(
        row.contains(&format!("&quot;index&quot;:{index},")),
        "the highlighted row is not event {index}: {row}"
    );
    // The same view in the browser, without console errors.
    let (dom, err) = run_chromium_url(
        &chromium,
        &scratch.path().join("view"),
        &format!("http://{addr}{path}"),
        NARROW,
        &["--dump-dom".into()],
    );
    assert_eq!(console_lines(&err), Vec::<&str>::new());
    assert!(dom.contains(&format!("id=\"ev-{index}\"")));
}

/// Appended to a copy of a page with a non-linearizable key: what chromium laid out of its
/// window (the impossible operation's bar, its lanes).
const WINDOW_PROBE: &str = "<script>window.addEventListener('load',function(){\
var b=document.body,r=document.querySelector('svg.window g.op.impossible rect');\
b.setAttribute('data-impossible',document.querySelectorAll('svg.window g.op.impossible').length);\
b.setAttribute('data-bar-width',r?Math.round(r.getBoundingClientRect().width):0);\
b.setAttribute('data-width',document.documentElement.scrollWidth);});</script>";

#[test]
fn chromium_draws_the_window_of_a_non_linearizable_key() {
    let Some(chromium) = chromium() else { return };
    // The classic stale read after a partition (tests/fixtures/linearizable-stale-sync-read),
    // judged by the real checkers and rendered by the real report.
    let root = tempfile::tempdir().unwrap();
    let run = rendered_fixture(root.path(), "linearizable-stale-sync-read");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let probed = run.join("probed.html");
    std::fs::write(
        &probed,
        html.replace("</body>", &format!("{WINDOW_PROBE}</body>")),
    )
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let (dom, err) = run_chromium(
        &chromium,
        &scratch.path().join("window"),
        &probed,
        NARROW,
        &["--dump-dom".into()],
    );
    assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output");
    assert_eq!(
        body_attr(&dom, "data-impossible").as_deref(),
        Some("1"),
        "{err}"
    );
    let bar: u32 = body_attr(&dom, "data-bar-width").unwrap().parse().unwrap();
    assert!(
        bar >= 3,
        "the impossible read's bar is not laid out ({bar} px)"
    );
    let width: u32 = body_attr(&dom, "data-width").unwrap().parse().unwrap();
    assert!(
        width <= NARROW.0,
        "the window pushes the page to {width} px"
    );
}
