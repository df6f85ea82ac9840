//! Jar manifests: what a jar's `META-INF/MANIFEST.MF` names on its `Class-Path`, and a copy of
//! a jar without that entry.
//!
//! Why: Debian's jars name their dependencies by absolute path (`/usr/share/java/...`), and the
//! JVM loads them from there whatever the classpath says. A distribution folder assembled from
//! another release's packages (`release`) must not pick up the host's jars (on Debian 12 with
//! its zookeeper package, `/usr/share/java/zookeeper-jute.jar` is 3.8.0's), so its jars are
//! copied without their `Class-Path`; the folder's `lib/` holds every dependency instead.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::Path;

const MANIFEST: &str = "META-INF/MANIFEST.MF";

/// The manifest's text, its 72-byte continuation lines unfolded (a line that starts with one
/// space continues the one before); empty when the jar has none.
pub fn manifest(jar: &Path) -> Result<String> {
    let file =
        std::fs::File::open(jar).with_context(|| format!("cannot open {}", jar.display()))?;
    let mut zip = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a jar (zip) file", jar.display()))?;
    let mut text = String::new();
    match zip.by_name(MANIFEST) {
        Ok(mut entry) => {
            entry
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read {MANIFEST} of {}", jar.display()))?;
        }
        Err(zip::result::ZipError::FileNotFound) => return Ok(String::new()),
        Err(e) => return Err(e).with_context(|| format!("{}", jar.display())),
    }
    Ok(unfold(&text))
}

/// Manifest text with its continuation lines joined.
fn unfold(text: &str) -> String {
    text.replace("\r\n", "\n").replace("\n ", "")
}

/// One manifest line as the JAR format writes it: at most 72 bytes a line, each continuation
/// starting with one space, CRLF-ended. (Java refuses a jar whose manifest has a line over 512
/// bytes: none of its classes load.)
fn fold(line: &str) -> String {
    let mut out = String::new();
    let mut width = 0;
    for c in line.chars() {
        if width + c.len_utf8() > 72 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += c.len_utf8();
    }
    out.push_str("\r\n");
    out
}

/// The entries of the jar's `Class-Path` (paths or URLs relative to the jar), in order.
pub fn class_path(jar: &Path) -> Result<Vec<String>> {
    Ok(manifest(jar)?
        .lines()
        .filter_map(|l| l.strip_prefix("Class-Path:"))
        .flat_map(|cp| cp.split_whitespace().map(str::to_string))
        .collect())
}

/// Copies `from` to `to` without the `Class-Path` entry of its manifest; every other entry is
/// copied byte for byte (compressed data included).
pub fn copy_without_class_path(from: &Path, to: &Path) -> Result<()> {
    let input =
        std::fs::File::open(from).with_context(|| format!("cannot open {}", from.display()))?;
    let mut zip = zip::ZipArchive::new(input)
        .with_context(|| format!("{} is not a jar (zip) file", from.display()))?;
    let output =
        std::fs::File::create(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut out = zip::ZipWriter::new(output);
    for i in 0..zip.len() {
        let entry = zip.by_index_raw(i)?;
        if entry.name() != MANIFEST {
            out.raw_copy_file(entry)?;
            continue;
        }
        drop(entry);
        let mut text = String::new();
        zip.by_index(i)?.read_to_string(&mut text)?;
        let kept: String = unfold(&text)
            .lines()
            .filter(|l| !l.starts_with("Class-Path:"))
            .map(fold)
            .collect();
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        out.start_file(MANIFEST, options)?;
        out.write_all(kept.as_bytes())?;
    }
    out.finish()
        .with_context(|| format!("cannot write {}", to.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jar with a folded Class-Path line and one class entry.
    fn jar(path: &Path) {
        let mut out = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let o = zip::write::SimpleFileOptions::default();
        out.start_file(MANIFEST, o).unwrap();
        out.write_all(
            b"Manifest-Version: 1.0\r\nClass-Path: /usr/share/java/zookeeper-jute.jar /usr/sh\r\n are/java/slf4j-api.jar\r\nMain-Class: X\r\n",
        )
        .unwrap();
        out.start_file("org/x/X.class", o).unwrap();
        out.write_all(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52])
            .unwrap();
        out.finish().unwrap();
    }

    #[test]
    fn the_class_path_is_read_unfolded_and_a_copy_drops_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a.jar"), dir.path().join("b.jar"));
        jar(&from);
        assert_eq!(
            class_path(&from).unwrap(),
            vec![
                "/usr/share/java/zookeeper-jute.jar",
                "/usr/share/java/slf4j-api.jar"
            ]
        );
        copy_without_class_path(&from, &to).unwrap();
        assert!(class_path(&to).unwrap().is_empty());
        let kept = manifest(&to).unwrap();
        assert!(
            kept.contains("Main-Class: X") && kept.contains("Manifest-Version"),
            "{kept}"
        );
        // Long lines are folded again (Java refuses lines over 512 bytes).
        let long = format!("Import-Package: {}", "org.x;version=1,".repeat(60));
        let folded = fold(&long);
        assert!(folded.split("\r\n").all(|l| l.len() <= 72), "{folded}");
        assert_eq!(unfold(&folded).trim_end(), long);
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&to).unwrap()).unwrap();
        let mut class = Vec::new();
        zip.by_name("org/x/X.class")
            .unwrap()
            .read_to_end(&mut class)
            .unwrap();
        assert_eq!(class, [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52]);
        let e = manifest(&dir.path().join("none.jar")).unwrap_err();
        assert!(format!("{e:#}").contains("cannot open"), "{e:#}");
    }
}
