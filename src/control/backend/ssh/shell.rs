//! POSIX shell quoting for the command lines sent to remote hosts. Every remote action is one
//! `sh -c` line (ssh carries a string, not an argv), so every word the controller did not write
//! itself is quoted here and nowhere else.

/// `word` as one single-quoted shell word: `it's` becomes `'it'\''s'`.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `program args...` as one quoted command line.
pub fn command_line(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The quoted line, run by a real sh, prints back exactly the words that went in.
    #[test]
    fn quoted_words_survive_a_real_shell() {
        let words = [
            "plain",
            "with space",
            "it's",
            "$(touch /nonexistent)",
            "`x`",
            "a\"b",
            "",
            "new\nline",
            "*",
            "-n",
        ];
        let line = command_line("printf", &[&["%s\\0"][..], &words[..]].concat());
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(out.status.success(), "{line}");
        let got: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        assert_eq!(&got[..words.len()], &words[..]);
    }

    #[test]
    fn safe_words_stay_readable() {
        assert_eq!(quote("/tmp/flc-1/n1/zoo.cfg"), "/tmp/flc-1/n1/zoo.cfg");
        assert_eq!(quote("a b"), "'a b'");
    }
}
