//! Parsing and printing the durations owners type and read: `1h`, `90m`, `2h30m`,
//! `tomorrow`, `forever`, `until-return`. The grammar itself is
//! [`lull_protocol::duration`], shared with the coordinator.

use agent_core::policy::{DonateSpan, PauseSpan};

/// The longest pause or offer: 30 days.
pub const SPAN_MAX_S: u64 = 30 * 86_400;

/// Parses a duration in the one grammar ([`lull_protocol::duration`]), 1s to 30d.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    lull_protocol::duration::parse_secs(s, 1, SPAN_MAX_S).map_err(|e| e.to_string())
}

/// `1h`, `3h`, any duration, `tomorrow`, or `forever`.
pub fn pause_span(s: &str) -> Result<PauseSpan, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "tomorrow" => Ok(PauseSpan::UntilTomorrow),
        "forever" | "until-resumed" => Ok(PauseSpan::UntilResumed),
        d => parse_secs(d).map(|secs| PauseSpan::For { secs }).map_err(|_| {
            format!("{s:?} is not a pause: use a duration up to 30d ({}), tomorrow, or forever", lull_protocol::duration::FORMS)
        }),
    }
}

/// Any duration or `until-return`.
pub fn donate_span(s: &str) -> Result<DonateSpan, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "until-return" | "until-i-return" => Ok(DonateSpan::UntilReturn),
        d => parse_secs(d)
            .map(|secs| DonateSpan::For { secs })
            .map_err(|_| format!("{s:?} is not an offer: use a duration up to 30d ({}), or until-return", lull_protocol::duration::FORMS)),
    }
}

/// A report's start: a duration in the one grammar (up to 3660 days back) or a day
/// `YYYY-MM-DD`, checked here as the coordinator will.
pub fn since(s: &str) -> Result<String, String> {
    coordinator::report::parse_since(s, chrono::Local::now().date_naive())?;
    Ok(s.trim().to_string())
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
        assert!(parse_secs("5y").unwrap_err().contains("not a duration"));
        assert!(parse_secs("5124095576030432h").unwrap_err().contains("1s..=30d"));
        assert_eq!(pause_span("Tomorrow"), Ok(PauseSpan::UntilTomorrow));
        assert_eq!(pause_span(" 1H "), Ok(PauseSpan::For { secs: 3600 }));
        assert!(pause_span("31d").unwrap_err().contains("up to 30d"));
        assert_eq!(since("90m").as_deref(), Ok("90m"));
        assert!(since("7 x").is_err());
        assert_eq!(donate_span("until-return"), Ok(DonateSpan::UntilReturn));
        assert_eq!(human(7500), "2h 05m");
        assert_eq!(human(190), "3m 10s");
    }
}
