//! Rendering from synthetic run folders (a 5-node cluster with elections, a leader kill, a
//! leader partition, a pause, a clock bump and writes): every file is written, PNGs have
//! the expected size and are not blank, SVGs and junit.xml parse, the page and the index
//! say what the run was.

use crate::support::report::fixture::{write_run, Fixture, FixtureSpec};
use crate::support::report::*;
use fle_chaos::report::{self, PLOTS};
use fle_chaos::{checker, exit};
use std::path::Path;

fn render(root: &Path, spec: &FixtureSpec) -> Fixture {
    let fx = write_run(root, spec).expect("write the fixture run");
    report::render_run(&fx.run_dir).expect("render the report");
    fx
}

fn expected_size(name: &str, nodes: u32) -> (u32, u32) {
    match name {
        "timeline" => (1280, 70 + 50 + 44 * nodes),
        "recovery" => (1280, 400),
        "operations" => (1280, 620),
        "epochs" => (1280, 640),
        "clock" => (1280, 380),
        other => panic!("unexpected plot {other}"),
    }
}

#[test]
fn every_plot_is_written_as_a_non_blank_png_of_the_right_size_and_a_parsing_svg() {
    let root = tempfile::tempdir().unwrap();
    let fx = render(root.path(), &FixtureSpec::small("plots"));
    assert!(fx.faults >= 4, "the fixture injects one fault of each kind");
    for name in PLOTS {
        let png = fx.run_dir.join(format!("{name}.png"));
        let (w, h, pixels) = read_png(&png);
        assert_eq!((w, h), expected_size(name, 5), "{name}.png size");
        let colors = distinct_colors(&pixels);
        assert!(colors > 40, "{name}.png has only {colors} colors: blank?");
        let white = count_near(&pixels, [255, 255, 255]);
        assert!(
            white < pixels.len() * 97 / 100,
            "{name}.png is nearly all white"
        );
        // Text renders with the embedded font: dark anti-aliased glyph pixels exist.
        assert!(
            count_near(&pixels, [0, 0, 0]) > 200,
            "{name}.png has no text"
        );

        let svg_text = std::fs::read_to_string(fx.run_dir.join(format!("{name}.svg"))).unwrap();
        let svg = parse_xml(&svg_text).unwrap_or_else(|e| panic!("{name}.svg: {e}"));
        assert_eq!(svg.name, "svg");
        assert!(svg.all("text").len() > 5, "{name}.svg has axis labels");
    }
    // The timeline shows each lane state of this run and the fault shading.
    let (_, _, t) = read_png(&fx.run_dir.join("timeline.png"));
    for (what, color) in [
        ("LEADING", [44, 160, 44]),
        ("FOLLOWING", [31, 119, 180]),
        ("LOOKING", [230, 180, 0]),
        ("down", [90, 90, 90]),
    ] {
        assert!(count_near(&t, color) > 300, "timeline lacks {what} spans");
    }
    let svg = std::fs::read_to_string(fx.run_dir.join("timeline.svg")).unwrap();
    for label in [
        "n1",
        "n5",
        "leader 5 · epoch 1",
        "kill (fault)",
        "partition (fault)",
        "pause (fault)",
    ] {
        assert!(svg.contains(label), "timeline.svg lacks {label:?}");
    }
    let (_, _, ops) = read_png(&fx.run_dir.join("operations.png"));
    assert!(
        count_near(&ops, [44, 160, 44]) > 100,
        "no ok operations drawn"
    );
    assert!(
        count_near(&ops, [214, 39, 40]) > 20,
        "no failed operations drawn"
    );
    let clock = std::fs::read_to_string(fx.run_dir.join("clock.svg")).unwrap();
    assert!(
        clock.contains("-600"),
        "the -600 s clock bump is on the axis"
    );
}

#[test]
fn junit_has_one_testcase_per_checker_with_failures_for_invalid_ones() {
    let root = tempfile::tempdir().unwrap();
    let spec = FixtureSpec {
        invalid: true,
        ..FixtureSpec::small("junit")
    };
    let fx = render(root.path(), &spec);
    let xml = std::fs::read_to_string(fx.run_dir.join("junit.xml")).unwrap();
    let doc = parse_xml(&xml).unwrap_or_else(|e| panic!("junit.xml: {e}"));
    let suites = doc.all("testsuite");
    assert_eq!(suites.len(), 1, "one testsuite per run");
    assert_eq!(suites[0].attr("name"), Some("junit"));
    let cases = doc.all("testcase");
    let names: Vec<_> = cases.iter().map(|c| c.attr("name").unwrap()).collect();
    let want: Vec<_> = fx.checkers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, want);
    let durability = cases
        .iter()
        .find(|c| c.attr("name") == Some("durability"))
        .unwrap();
    let failure = &durability.all("failure")[0];
    assert_eq!(
        failure.attr("message"),
        Some("acknowledged write 17 (zxid 0x100000011) is missing from n2's final log <lost>")
    );
    assert!(
        failure.text.contains("4294967313"),
        "evidence in the failure body"
    );
    let unknown = cases
        .iter()
        .find(|c| c.attr("name") == Some("epoch-monotonicity"))
        .unwrap();
    assert_eq!(unknown.all("error").len(), 1, "unknown is an error");
    for ok in ["election-safety", "recovery"] {
        let c = cases.iter().find(|c| c.attr("name") == Some(ok)).unwrap();
        assert!(c.children.is_empty(), "{ok} passed: no failure");
    }
    assert_eq!(suites[0].attr("failures"), Some("1"));
    assert_eq!(suites[0].attr("errors"), Some("1"));
    assert_eq!(suites[0].attr("tests"), Some("4"));
}

#[test]
fn the_page_is_self_contained_and_shows_verdict_settings_checkers_plots_schedule_history() {
    let root = tempfile::tempdir().unwrap();
    let spec = FixtureSpec {
        invalid: true,
        ..FixtureSpec::small("page")
    };
    let fx = render(root.path(), &spec);
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    assert!(html.contains("class=\"banner invalid\""));
    assert!(html.contains("INVALID — page"));
    assert!(html.contains("not passed: durability, epoch-monotonicity"));
    assert!(html.contains("--seed 42"), "the replay command");
    assert!(
        html.contains("missing from n2&#39;s final log &lt;lost&gt;"),
        "escaped explanation"
    );
    assert_eq!(
        html.matches("src=\"data:image/png;base64,").count(),
        PLOTS.len()
    );
    for name in PLOTS {
        assert!(html.contains(&format!("href=\"{name}.svg\"")));
    }
    // Nothing is fetched from the network.
    for external in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(external), "page references {external}");
    }
    let schedule = html
        .split("id=\"schedule\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(schedule.matches("<tr><td>").count(), fx.nemesis_actions);
    let checkers = html
        .split("id=\"checkers\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(checkers.matches("<tr><td>").count(), 4);
    for link in [
        "href=\"history.jsonl\"",
        "href=\"nodes/n1/node.log\"",
        "href=\"controller.log\"",
    ] {
        assert!(html.contains(link), "missing link {link}");
    }
    assert!(html.contains(&format!("First 200 of {} events", fx.events)));
}

/// The recovery table's rows: (fault at, kind, nodes, recovery as shown, leader then).
fn recovery_rows(html: &str) -> Vec<[String; 5]> {
    let table = html
        .split("id=\"recovery\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    table
        .split("<tr><td>")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row
                .split("<td>")
                .map(|c| c.split("</td>").next().unwrap().to_string())
                .collect();
            assert_eq!(cells.len(), 5, "{row}");
            [0, 1, 2, 3, 4].map(|i| cells[i].clone())
        })
        .collect()
}

fn seconds(cell: &str) -> Option<f64> {
    cell.strip_suffix(" s")?.parse().ok()
}

/// The report's recovery times are the recovery checker's definition over the history it
/// judged (one feed of the checkers' digest), whatever results.json says: the fixture's
/// results.json has no recovery measurements, and the times are there all the same.
#[test]
fn recovery_times_are_the_checkers_definition_over_the_judged_history() {
    let root = tempfile::tempdir().unwrap();
    let derived = render(root.path(), &FixtureSpec::small("derived"));
    let html = std::fs::read_to_string(derived.run_dir.join("report.html")).unwrap();
    assert!(html.contains("Source: the recovery checker"));
    let rows = recovery_rows(&html);
    assert_eq!(rows.len(), derived.faults);
    // The fixture's nodes notice a lost leader after 0.4 s and elect a new one 0.6 s later
    // (a restarted node is up again at once), so every fault recovers within a second or so.
    for row in &rows {
        let secs = seconds(&row[3]).unwrap_or_else(|| panic!("no recovery in {row:?}"));
        assert!(secs < 1.5, "recovery {secs} s in row {row:?}");
    }
    let kill = rows.iter().find(|r| r[1] == "kill").unwrap();
    let kill_s = seconds(&kill[3]).unwrap();
    assert!(
        kill_s >= 0.6,
        "a leader kill waits for an election: {kill_s}"
    );
}

/// The done-criterion of issue 13: on a run whose partitions isolate the leader, the recovery
/// checker's per-fault times and the report's are the same numbers, whichever computed them,
/// and the cut-off leader (its followers not having noticed yet) is not counted as recovered.
#[test]
fn the_checker_and_the_report_give_the_same_recovery_times_on_an_isolate_leader_run() {
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(
        root.path(),
        &FixtureSpec {
            duration_s: 60.0,
            results: false,
            ..FixtureSpec::small("isolate")
        },
    )
    .unwrap();
    let history = std::fs::read_to_string(fx.run_dir.join("history.jsonl")).unwrap();
    assert!(history.contains("\"shape\":\"isolate-leader\""));

    // Without results.json: the report's own load feeds the digest to the view.
    report::render_run(&fx.run_dir).unwrap();
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    let from_history = recovery_rows(&html);

    // The real checker, then the report from its results.
    let results = checker::check_run(&fx.run_dir, &checker::CheckOptions::default()).unwrap();
    let measured = results
        .checkers
        .iter()
        .find_map(|c| c.recovery())
        .expect("the recovery checker measures every fault");
    report::render_run(&fx.run_dir).unwrap();
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    assert!(html.contains("Source: the recovery checker"));
    let from_checker = recovery_rows(&html);

    assert_eq!(from_checker.len(), fx.faults);
    assert_eq!(from_history, from_checker);
    for (row, m) in from_checker.iter().zip(&measured.faults) {
        assert_eq!(row[0], format!("{:.3} s", m.start_ns as f64 / 1e9));
        assert_eq!(row[1], m.kind.name());
        let ms = m.ms_to_quorum_leader.expect("every fault recovers");
        assert_eq!(row[3], format!("{:.3} s", ms as f64 / 1e3));
    }
    let partitions: Vec<_> = from_checker
        .iter()
        .filter(|r| r[1] == "partition")
        .collect();
    assert!(partitions.len() >= 2, "{from_checker:?}");
    for p in partitions {
        // The fixture's followers go on following the isolated leader for 0.4 s, and a new
        // leader is elected 0.6 s after that. Counting the cut-off leader would give ~0 s.
        let s = seconds(&p[3]).unwrap();
        assert!(
            s >= 0.5,
            "partition recovered in {s} s: the cut-off leader counted"
        );
    }
}

#[test]
fn the_index_lists_every_run_with_its_verdict() {
    let root = tempfile::tempdir().unwrap();
    let a = render(
        root.path(),
        &FixtureSpec {
            seed: 1,
            ..FixtureSpec::small("alpha")
        },
    );
    let b = render(
        root.path(),
        &FixtureSpec {
            seed: 2,
            invalid: true,
            ..FixtureSpec::small("beta")
        },
    );
    let c = write_run(
        root.path(),
        &FixtureSpec {
            seed: 3,
            results: false,
            ..FixtureSpec::small("gamma")
        },
    )
    .unwrap();
    report::render_run(&c.run_dir).unwrap();
    let index = std::fs::read_to_string(root.path().join("index.html")).unwrap();
    let rows: Vec<&str> = index.split("<tr><td>").skip(1).collect();
    assert_eq!(rows.len(), 3);
    // Newest first: the fixture's start time grows with the seed.
    assert!(rows[0].contains(">gamma<") && rows[0].contains("class=\"unknown\">not checked"));
    assert!(rows[1].contains(">beta<") && rows[1].contains("class=\"invalid\">invalid"));
    assert!(rows[2].contains(">alpha<") && rows[2].contains("class=\"valid\">valid"));
    for fx in [&a, &b] {
        let rel = fx
            .run_dir
            .strip_prefix(root.path())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(index.contains(&format!("href=\"{rel}/report.html\"")));
    }
    assert!(rows[0].contains("<td>5</td>") && rows[0].contains("kill, partition, pause, clock"));
}

#[test]
fn bad_run_folders_are_bad_input_naming_the_path() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nope");
    let err = report::render_run(&missing).unwrap_err();
    assert_eq!(exit::code_for(&err), exit::BAD_ARGS);
    assert!(err.to_string().contains("nope"), "{err}");

    let empty = root.path().join("t").join("r");
    std::fs::create_dir_all(&empty).unwrap();
    let err = report::render_run(&empty).unwrap_err();
    assert_eq!(exit::code_for(&err), exit::BAD_ARGS);
    assert!(err.to_string().contains("no test.json"), "{err}");
}

#[test]
fn a_torn_last_line_is_skipped_and_a_damaged_line_is_named() {
    let root = tempfile::tempdir().unwrap();
    let fx = write_run(
        root.path(),
        &FixtureSpec {
            duration_s: 40.0,
            ..FixtureSpec::small("torn")
        },
    )
    .unwrap();
    let history = fx.run_dir.join("history.jsonl");
    let mut text = std::fs::read_to_string(&history).unwrap();
    text.push_str("{\"index\":99999,\"time\":1");
    std::fs::write(&history, &text).unwrap();
    report::render_run(&fx.run_dir).expect("a torn last line is what a killed controller leaves");
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    assert!(html.contains(&format!("of {} events", fx.events)));

    let mut lines: Vec<&str> = text.lines().collect();
    lines[10] = "not json";
    std::fs::write(&history, lines.join("\n")).unwrap();
    let err = report::render_run(&fx.run_dir).unwrap_err();
    assert!(format!("{err:#}").contains("line 11, column 2"), "{err:#}");
    assert_eq!(
        exit::code_for(&err),
        exit::BAD_ARGS,
        "a damaged history is bad input"
    );

    // Far into the file (past the first block the parser threads get), still named exactly.
    let mut lines: Vec<&str> = text.lines().collect();
    let far = lines.len() - 3;
    lines[far] = "{\"index\": broken";
    std::fs::write(&history, lines.join("\n")).unwrap();
    assert!(
        std::fs::metadata(&history).unwrap().len() > 4 << 20,
        "history spans several blocks"
    );
    let err = report::render_run(&fx.run_dir).unwrap_err();
    assert!(
        format!("{err:#}").contains(&format!("line {}, column", far + 1)),
        "{err:#}"
    );
}

#[test]
fn an_invalid_run_explains_itself_in_words_rows_markers_and_a_zoomed_plot() {
    let root = tempfile::tempdir().unwrap();
    let fx = render(
        root.path(),
        &FixtureSpec {
            lose_writes: true,
            real_checkers: true,
            ..FixtureSpec::small("explained")
        },
    );
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    let account = html
        .split("<p class=\"account\" id=\"account-durability\"")
        .nth(1)
        .expect("an account paragraph for durability")
        .split("</p>")
        .next()
        .unwrap();
    // What, who, when, under which fault, who led next.
    for words in [
        "Lost write",
        "acknowledged by n",
        "between ",
        "without a quorum behind it",
        "there was no quorum-backed leader",
        "in force: partition of n",
        "cut off from",
        "with a quorum from",
    ] {
        assert!(
            account.contains(words),
            "account lacks {words:?}: {account}"
        );
    }
    // Evidence rows link to the history line of each event.
    let rows = html
        .split("id=\"evidence-durability\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert!(rows.contains("<a class=\"ev\" data-index=\""));
    assert!(rows.contains("href=\"history.jsonl?around="));
    assert!(rows.contains("write ok"));
    // Stale leaders, leaderless windows and overlaps as tables.
    for id in ["stale-leaders", "leaderless-windows", "leader-overlaps"] {
        // A table, or "None." when the run had none (this one has no overlaps).
        assert!(html.contains(&format!("id=\"{id}\"")), "no {id} section");
    }
    // A zoomed plot of the first violation, and markers in every time plot.
    assert!(fx.run_dir.join("zoom-durability.png").is_file());
    assert!(html.contains("id=\"plot-zoom-durability\""));
    for name in [
        "timeline",
        "recovery",
        "operations",
        "epochs",
        "clock",
        "zoom-durability",
    ] {
        let svg = std::fs::read_to_string(fx.run_dir.join(format!("{name}.svg"))).unwrap();
        assert!(
            svg.contains("✕ durability"),
            "{name}.svg has no violation marker"
        );
    }
    assert!(html.matches("class=\"violation\"").count() > 0);

    // A valid run's page has none of it, and is still one file with no network.
    let fx = render(root.path(), &FixtureSpec::small("fine"));
    let html = std::fs::read_to_string(fx.run_dir.join("report.html")).unwrap();
    assert!(!html.contains("What went wrong"));
    assert!(!html.contains("class=\"violation\""));
    assert!(std::fs::read_dir(&fx.run_dir).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("zoom-")));
    for external in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(external), "page references {external}");
    }
}

#[test]
fn a_non_linearizable_key_is_drawn_as_lanes_with_the_impossible_read_marked() {
    // The classic stale read: a deposed leader answers a sync + read with the old value after
    // a newer write completed on the other side (tests/fixtures/linearizable-stale-sync-read).
    let root = tempfile::tempdir().unwrap();
    let run = rendered_fixture(root.path(), "linearizable-stale-sync-read");
    let html = std::fs::read_to_string(run.join(fle_chaos::store::REPORT)).unwrap();
    let section = html
        .split("id=\"not-linearizable\"")
        .nth(1)
        .expect("no section for the non-linearizable key");
    let svg = &section[..section.find("</svg>").expect("the window is drawn")];
    assert_eq!(svg.matches("class=\"op impossible\"").count(), 1, "{svg}");
    assert!(
        svg.contains("read → 20 ok v0"),
        "the stale read is labelled: {svg}"
    );
    assert!(
        svg.contains("set 21 ok v1"),
        "the write it missed is drawn: {svg}"
    );
    assert_eq!(
        svg.matches("client ").count(),
        3,
        "one lane per client: {svg}"
    );
}
