//! Parsing and printing the durations owners type and read: `1h`, `90m`, `2h30m`,
//! `tomorrow`, `forever`, `until-return`.

use agent_core::policy::{DonateSpan, PauseSpan};

/// Parses `1h`, `90m`, `45s`, `2h30m` into seconds.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    let mut total = 0u64;
    let mut num = String::new();
    let mut any = false;
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 1h, 90m or 2h30m"))?;
        num.clear();
        total += n * match c {
            'd' => 86_400,
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("{s:?}: unknown unit {c:?} (use d, h, m or s)")),
        };
        any = true;
    }
    if !num.is_empty() || !any {
        return Err(format!("{s:?} is not a duration like 1h, 90m or 2h30m (a unit is required)"));
    }
    if total == 0 || total > 30 * 86_400 {
        return Err(format!("{s:?}: must be between 1s and 30d"));
    }
    Ok(total)
}

/// `1h`, `3h`, any duration, `tomorrow`, or `forever`.
pub fn pause_span(s: &str) -> Result<PauseSpan, String> {
    match s {
        "tomorrow" => Ok(PauseSpan::UntilTomorrow),
        "forever" | "until-resumed" => Ok(PauseSpan::UntilResumed),
        d => parse_secs(d).map(|secs| PauseSpan::For { secs }),
    }
}

/// Any duration or `until-return`.
pub fn donate_span(s: &str) -> Result<DonateSpan, String> {
    match s {
        "until-return" | "until-i-return" => Ok(DonateSpan::UntilReturn),
        d => parse_secs(d).map(|secs| DonateSpan::For { secs }),
    }
}

/// A duration for people: `2h 05m`, `3m 10s`, `42s`.
pub fn human(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_secs("1h"), Ok(3600));
        assert_eq!(parse_secs("2h30m"), Ok(9000));
        assert!(parse_secs("90").is_err());
        assert!(parse_secs("0m").is_err());
        assert!(parse_secs("5y").unwrap_err().contains("unknown unit"));
        assert_eq!(pause_span("tomorrow"), Ok(PauseSpan::UntilTomorrow));
        assert_eq!(donate_span("until-return"), Ok(DonateSpan::UntilReturn));
        assert_eq!(human(7500), "2h 05m");
        assert_eq!(human(190), "3m 10s");
    }
}
