//! The crate's layers, lowest first, and the test that keeps imports going down: production
//! code of a module may name (`crate::X`) only modules of its own layer or below. The
//! pipeline's stages sit under the commands that drive them; a command may use another
//! command below it (a sweep runs tests, a shrink replays runs); commands live in
//! `src/commands/` and are ranked by their own names. Tests (`#[cfg(test)]`
//! blocks, `tests/`) may reach anywhere. A new top-level module gets a row here.

/// Each top-level module of `src/` with its layer.
const LAYERS: &[(&str, u8)] = &[
    // What everything shares.
    ("api", 0),
    ("duration", 0),
    ("exit", 0),
    // The history: the event model, its store, the view over it.
    ("history", 1),
    // The run folder: its files' names, paths, load and save (`RunDir`).
    ("store", 1),
    // Stages that read the history or drive nodes.
    ("checker", 2),
    ("control", 2),
    ("report", 3),
    ("workload", 3),
    ("nemesis", 4),
    // Commands, each over the ones before it.
    ("run", 5),
    ("sim", 6),
    ("shrink", 7),
    ("sweep", 8),
    ("prune", 9),
];

#[cfg(test)]
mod tests {
    use super::LAYERS;
    use std::path::{Path, PathBuf};

    fn layer(module: &str) -> Option<u8> {
        LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
    }

    /// Every `.rs` file below `dir`.
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The top-level modules a file's production code names: `crate::X` outside comments,
    /// before its first `#[cfg(test)]`.
    fn named_modules(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            for (i, _) in code.match_indices("crate::") {
                let mut rest = &code[i + "crate::".len()..];
                // A command is ranked by its own name, not by the folder that holds them.
                if let Some(command) = rest.strip_prefix("commands::") {
                    rest = command;
                }
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.push(name);
                }
            }
        }
        names
    }

    #[test]
    fn no_production_code_imports_a_module_of_a_higher_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut problems = Vec::new();
        for file in &files {
            let rel = file.strip_prefix(&src).unwrap();
            let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy());
            let mut first = parts.next().unwrap();
            if first == "commands" {
                first = parts.next().unwrap();
            }
            let own = first.trim_end_matches(".rs").to_string();
            if matches!(own.as_str(), "lib" | "main" | "layers" | "mod") {
                continue;
            }
            let Some(own_layer) = layer(&own) else {
                problems.push(format!("src/{first}: no row in src/layers.rs's LAYERS"));
                continue;
            };
            let text = std::fs::read_to_string(file).unwrap();
            for name in named_modules(&text) {
                match layer(&name) {
                    Some(l) if l > own_layer => problems.push(format!(
                        "{}: {own} (layer {own_layer}) names crate::{name} (layer {l})",
                        rel.display()
                    )),
                    Some(_) => {}
                    None if name == "test_skip" => {}
                    None => problems.push(format!(
                        "{}: crate::{name} has no row in LAYERS",
                        rel.display()
                    )),
                }
            }
        }
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    }

    #[test]
    fn the_scan_sees_an_upward_import_and_skips_comments_and_tests() {
        let text = "use crate::history::Event;\n// crate::commands::sweep in a comment\n\
                    let x = crate::commands::sweep::carried::FILE;\n#[cfg(test)]\nuse crate::commands::prune;\n";
        assert_eq!(named_modules(text), ["history", "sweep"]);
    }
}
