//! The words of schedule text: durations ("10s", "-2m"), rates ("256kbit"), and where in a
//! TOML text something is (its line), for errors that name the line. Shared by every parser of
//! schedule files (`schedule_file`, `raw_fault`, `timed`) and by flags that take durations.

use std::time::Duration;

/// "10s", "500ms", "2m", "1.5s".
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let ms = parse_signed_ms(text)?;
    if ms < 0 || text.trim_start().starts_with('-') {
        return Err(format!(
            "'{text}' is negative; a duration is like 10s, 500ms or 2m"
        ));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// "256kbit", "1mbit", "1gbit" → kbit/s (at least 8: tbf needs a few packets' worth).
pub fn parse_rate_kbit(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a rate like 256kbit or 1mbit"))?;
    let scale = match unit {
        "kbit" => 1.0,
        "mbit" => 1000.0,
        "gbit" => 1_000_000.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}'; use kbit, mbit or gbit"
            ))
        }
    };
    let kbit = (value * scale).round() as u64;
    if kbit < 8 {
        return Err(format!("'{text}' is below 8kbit; use at least 8kbit"));
    }
    Ok(kbit)
}

/// "+300s", "-2m", "500ms" → milliseconds.
pub(super) fn parse_signed_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 10s, 500ms, 2m or -30s"))?;
    let scale = match unit {
        "ms" => 1.0,
        "s" | "" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        // Days: retention ages (`prune --older-than 14d`).
        "d" => 86_400_000.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}'; use ms, s, m, h or d"
            ))
        }
    };
    Ok((sign * value * scale).round() as i64)
}

/// A TOML error as "line N: message".
pub(super) fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        // The line holding the span's first byte: newlines before it, plus one (`lines()`
        // would miss the line the span starts, a key at the start of its line).
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let msg = e.message().trim();
    match line {
        Some(l) => format!("line {l}: {msg}"),
        None => msg.to_string(),
    }
}

/// The 1-based line where the top-level `key` is first set (or its `[[key]]` table starts),
/// or 1.
pub(super) fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with(key) || l.starts_with(&format!("[[{key}]]"))
        })
        .map(|i| i + 1)
        .unwrap_or(1)
}

/// The 1-based line of the `index`-th `header` (`[[fault]]`, `[[step]]`), or 1.
pub(super) fn table_line(text: &str, header: &str, index: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with(header))
        .nth(index)
        .map(|(i, _)| i + 1)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_signs() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_signed_ms("-30s").unwrap(), -30_000);
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
