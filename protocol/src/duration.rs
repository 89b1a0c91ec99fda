//! The one duration grammar of every command and route: a number with a unit, one or more
//! times (`45s`, `90m`, `2h30m`, `2h 30m`, `7d`, `2w`), units `s`, `m`, `h`, `d`, `w` or their
//! words (`sec`, `min`, `hour(s)`, `day(s)`, `week(s)`), any case, spaces around ignored.
//! Each caller gives its bound; a value past it (overflowing ones included) is refused
//! with the bound named, never wrapped.

/// The forms, for error messages.
pub const FORMS: &str = "a number with a unit: 45s, 90m, 2h30m, 7d or 2w";

/// A duration that does not parse or lies outside its bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not a duration in the grammar.
    Form(String),
    /// Outside `min..=max` seconds.
    OutOfBounds { text: String, min: u64, max: u64 },
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Form(t) => write!(f, "{t:?} is not a duration: use {FORMS}"),
            Self::OutOfBounds { text, min, max } => write!(f, "{text:?} is outside the allowed {}..={}", human(*min), human(*max)),
        }
    }
}

impl std::error::Error for DurationError {}

fn unit_secs(unit: &str) -> Option<u64> {
    Some(match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        _ => return None,
    })
}

/// Parses `text` into seconds within `min..=max`.
pub fn parse_secs(text: &str, min: u64, max: u64) -> Result<u64, DurationError> {
    let form = || DurationError::Form(text.to_string());
    let bounds = || DurationError::OutOfBounds { text: text.trim().to_string(), min, max };
    let s = text.trim().to_ascii_lowercase();
    let mut rest = s.as_str();
    if rest.is_empty() {
        return Err(form());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(form());
        }
        let after = rest[digits..].trim_start();
        let letters = after.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after.len());
        let per = unit_secs(&after[..letters]).ok_or_else(form)?;
        // Too many digits for u64 is too long, as is any product or sum past u64.
        let n: u64 = rest[..digits].parse().map_err(|_| bounds())?;
        total = n.checked_mul(per).and_then(|v| total.checked_add(v)).ok_or_else(bounds)?;
        rest = after[letters..].trim_start();
    }
    if !(min..=max).contains(&total) {
        return Err(bounds());
    }
    Ok(total)
}

/// A bound for people: `30d`, `1h`, `45s`, `1d 2h`.
pub fn human(secs: u64) -> String {
    let parts = [(secs / 86_400, "d"), (secs % 86_400 / 3600, "h"), (secs % 3600 / 60, "m"), (secs % 60, "s")];
    let shown: Vec<String> = parts.iter().filter(|(n, _)| *n > 0).map(|(n, u)| format!("{n}{u}")).collect();
    if shown.is_empty() {
        "0s".into()
    } else {
        shown.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    #[test]
    fn forms() {
        for (t, v) in [
            ("45s", 45),
            ("90m", 5400),
            ("2h30m", 9000),
            ("2h 30m", 9000),
            (" 7d", 7 * DAY),
            (" 1h ", 3600),
            ("2W", 14 * DAY),
            ("3 hours", 10_800),
            ("1Day", DAY),
        ] {
            assert_eq!(parse_secs(t, 1, 3650 * DAY), Ok(v), "{t}");
        }
        for t in ["", "90", "h", "5y", "1h-", "-1h", "1.5h", "tomorrow"] {
            assert_eq!(parse_secs(t, 1, 3650 * DAY), Err(DurationError::Form(t.into())), "{t}");
        }
    }

    #[test]
    fn bounds_never_wrap() {
        // 5124095576030432h × 3600 wraps u64 to about an hour: refused, not shortened.
        for t in ["5124095576030432h", "99999999999999999999999d", "31d", "0s"] {
            let e = parse_secs(t, 1, 30 * DAY).expect_err(t);
            assert!(matches!(e, DurationError::OutOfBounds { .. }), "{t}: {e}");
            assert!(e.to_string().contains("1s..=30d"), "{e}");
        }
    }
}
