//! Errors as one line that says each thing once. Library errors here carry their cause
//! both as text (`"control socket …: {source}"`) and as `source()`, so printing the chain
//! (anyhow's `{:#}`) repeats it: "X: X". [`once`] joins the chain and skips a cause whose
//! text the line already holds.

/// The error chain as one line, each message once.
pub fn once<'a>(chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut line = String::new();
    for cause in chain {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("control socket /s: {source}")]
    struct Outer {
        source: std::io::Error,
    }

    #[test]
    fn each_cause_once() {
        let e = Outer { source: std::io::Error::from(std::io::ErrorKind::WouldBlock) };
        let chain: Vec<&(dyn std::error::Error + 'static)> = vec![&e, &e.source];
        let line = super::once(chain);
        assert_eq!(line.matches("would block").count(), 1, "{line}");
    }
}
