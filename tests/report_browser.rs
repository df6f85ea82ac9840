//! The browser test: Debian's chromium opens a rendered report.html headless (from the file,
//! with networking off), takes a screenshot and dumps the DOM. The page must show the
//! verdict, every plot (decoded by the browser) and the checker table, with no console
//! errors. Chromium is installed when missing and the test runs as root; otherwise the test
//! says it is skipped and why.
//!
//! `FLC_REPORT_SCREENSHOT=/path/shot.png` keeps a copy of the screenshot to look at.

mod report_support;

use fle_chaos::report::{self, PLOTS};
use report_support::fixture::{write_run, FixtureSpec};
use report_support::*;
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
        eprintln!("SKIPPED report_browser: chromium is not installed and installing it needs root (apt-get install chromium)");
        return None;
    }
    eprintln!("report_browser: installing Debian's chromium (apt-get install -y chromium)");
    let ok = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !ok(&[
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "chromium",
    ]) {
        assert!(ok(&["update", "-qq"]), "apt-get update failed");
        assert!(
            ok(&[
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "chromium"
            ]),
            "apt-get install chromium failed"
        );
    }
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
        .arg(format!("file://{}", page.display()))
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
    let unfolded = scratch.path().join("unfolded.html");
    let html = std::fs::read_to_string(&page).unwrap();
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
