//! Desktop notifications (notify-rust: over D-Bus on Linux, a toast on Windows): guest work stopped because the owner
//! came back, the day's budget used up, a memory restore that took over a second. At most
//! one notice of a kind per `notifications.min_interval_s`; `notifications.enabled = false`
//! turns them off. Without a notification daemon the error is logged, nothing more.

use agent_core::agent::Notice;
use agent_core::control::AlertKind;
use agent_core::policy::Action;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A short phrase for an alert (the status window and the notification say it whole).
pub fn alert_phrase(kind: AlertKind) -> &'static str {
    match kind {
        AlertKind::LedgerRecovered => "the ledger was damaged or lost (Open Lull says what was kept)",
        AlertKind::RecordRebuilt => "today's record was rebuilt from the ledger",
        AlertKind::LedgerDamaged => "the ledger is damaged; restart Lull",
        AlertKind::LedgerWriteFailed => "an interruption could not be written to the ledger",
        AlertKind::CredentialRefused => "the pool refuses this machine's credential; enrol it again",
    }
}

/// The kinds of notice, each rate-limited on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Guest work stopped because the owner came back.
    Evicted,
    /// The day's interruption budget is used up.
    BudgetUsed,
    /// Restoring the owner's memory took longer than a second.
    SlowRestore,
    /// Something about Lull itself needs the owner's attention: its ledger recovered,
    /// damaged or not written, or the pool refusing this machine's credential.
    Attention,
}

/// One notice to show.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub kind: Kind,
    pub summary: String,
    pub body: String,
}

/// Restores slower than this are worth telling the owner about.
pub const SLOW_RESTORE: Duration = Duration::from_secs(1);

/// The notice for an agent notice, if it deserves one.
pub fn message_for(n: &Notice) -> Option<Message> {
    match n {
        Notice::Action(_, Action::InterruptionCounted(i)) => {
            let left = i.limit.saturating_sub(i.number);
            Some(if left == 0 {
                Message {
                    kind: Kind::BudgetUsed,
                    summary: "Lull: today's interruptions are used up".into(),
                    body: format!(
                        "Guest work stopped because you came back ({} of {}). Your machine is out of the pool until tomorrow.",
                        i.number, i.limit
                    ),
                }
            } else {
                Message {
                    kind: Kind::Evicted,
                    summary: "Lull: guest work stopped, you are back".into(),
                    body: format!("{left} of {} interruptions left today.", i.limit),
                }
            })
        }
        Notice::InterruptionNotRecorded { interruption: i, error, kept_in_record, .. } => Some(Message {
            kind: Kind::Attention,
            summary: "Lull: an interruption could not be written to the ledger".into(),
            body: format!(
                "Interruption {} of {} still counts against today's budget{}. The ledger said: {error}",
                i.number,
                i.limit,
                if *kept_in_record { " (kept in today's record)" } else { " until Lull stops" }
            ),
        }),
        Notice::Alert(a) => Some(Message {
            kind: Kind::Attention,
            summary: format!("Lull: {}", alert_phrase(a.kind)),
            body: match &a.action {
                Some(action) => format!("{} {action}", a.message),
                None => a.message.clone(),
            },
        }),
        Notice::Restored { anon_ms, file_cache_ms } => {
            // The two parts run one after the other: the owner waited for both.
            let ms = anon_ms.unwrap_or(0) + file_cache_ms.unwrap_or(0);
            (Duration::from_millis(ms) > SLOW_RESTORE).then(|| Message {
                kind: Kind::SlowRestore,
                summary: "Lull: your memory took a while to come back".into(),
                body: format!("Restoring your programs' memory after guest work took {:.1} s.", ms as f64 / 1000.0),
            })
        }
        _ => None,
    }
}

/// At most one notice of each kind per interval.
#[derive(Debug, Default)]
pub struct Limiter {
    last: HashMap<Kind, Instant>,
}

impl Limiter {
    /// True (and remembered) when a notice of `kind` may be shown at `now`.
    pub fn allow(&mut self, kind: Kind, now: Instant, min_interval: Duration) -> bool {
        match self.last.get(&kind) {
            Some(t) if now.saturating_duration_since(*t) < min_interval => false,
            _ => {
                self.last.insert(kind, now);
                true
            }
        }
    }
}

/// Shows a notice on the desktop.
pub fn show(m: &Message) -> Result<(), notify_rust::error::Error> {
    notify_rust::Notification::new().appname("Lull").summary(&m.summary).body(&m.body).icon("lull-tray").show().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::clock::{MonoMs, Now};
    use agent_core::config::EvictionMode;
    use agent_core::policy::{Interruption, ReturnCause, StateKind};

    fn now() -> Now {
        let utc = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("valid timestamp");
        Now { mono: MonoMs(1), utc, local: utc.naive_utc() }
    }

    fn counted(number: u32, limit: u32) -> Notice {
        Notice::Action(
            now(),
            Action::InterruptionCounted(Interruption {
                day: now().local.date(),
                number,
                limit,
                cause: ReturnCause::Input,
                at_utc: now().utc,
                at_mono: MonoMs(1),
                mode: EvictionMode::LingerLonger,
            }),
        )
    }

    #[test]
    fn eviction_says_how_many_are_left() {
        let m = message_for(&counted(2, 5)).expect("a notice");
        assert_eq!(m.kind, Kind::Evicted);
        assert_eq!(m.body, "3 of 5 interruptions left today.");
        let m = message_for(&counted(5, 5)).expect("a notice");
        assert_eq!(m.kind, Kind::BudgetUsed);
        assert!(m.body.contains("5 of 5") && m.body.contains("until tomorrow"), "{}", m.body);
    }

    #[test]
    fn only_slow_restores_are_told() {
        assert!(message_for(&Notice::Restored { anon_ms: Some(1000), file_cache_ms: None }).is_none());
        let m = message_for(&Notice::Restored { anon_ms: Some(1000), file_cache_ms: Some(1500) }).expect("a notice");
        assert_eq!(m.kind, Kind::SlowRestore);
        assert!(m.body.contains("2.5 s"), "{}", m.body);
        let quiet = Notice::Action(now(), Action::StateChanged { from: StateKind::Idle, to: StateKind::Donating, reason: "r".into() });
        assert!(message_for(&quiet).is_none());
        // The owner lowering the limit to today's count is their own doing: no notice.
        let lowered = Notice::Action(now(), Action::StateChanged { from: StateKind::Idle, to: StateKind::OutOfBudget, reason: "r".into() });
        assert!(message_for(&lowered).is_none());
    }

    #[test]
    fn an_interruption_not_written_is_told_but_never_as_counted() {
        let Notice::Action(at, Action::InterruptionCounted(i)) = counted(4, 5) else { unreachable!() };
        let n = Notice::InterruptionNotRecorded { at, interruption: i, error: "disk I/O error".into(), kept_in_record: true };
        let m = message_for(&n).expect("a notice");
        assert_eq!(m.kind, Kind::Attention);
        assert!(m.body.contains("4 of 5") && m.body.contains("disk I/O error") && m.body.contains("today's record"), "{}", m.body);
        assert!(!format!("{} {}", m.summary, m.body).contains("counted"), "{m:?}");
        let a = agent_core::control::Alert {
            kind: AlertKind::CredentialRefused,
            message: "refused".into(),
            action: Some("enrol again".into()),
        };
        let m = message_for(&Notice::Alert(a)).expect("a notice");
        assert_eq!((m.kind, m.body.as_str()), (Kind::Attention, "refused enrol again"));
    }

    #[test]
    fn limiter_allows_one_per_kind_per_interval() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        let every = Duration::from_secs(300);
        assert!(l.allow(Kind::Evicted, t0, every));
        assert!(!l.allow(Kind::Evicted, t0 + Duration::from_secs(299), every));
        assert!(l.allow(Kind::SlowRestore, t0 + Duration::from_secs(1), every), "kinds are limited separately");
        assert!(l.allow(Kind::Evicted, t0 + Duration::from_secs(300), every));
    }

    /// A notice really reaches a notification daemon: a private D-Bus session bus, dunst
    /// on a private Xvfb, and dunst's own history read back with `dunstctl`. Skips
    /// without those tools unless LULL_REQUIRE_TRAY=1.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_notice_reaches_the_notification_daemon() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let have =
            |t: &str| Command::new("sh").arg("-c").arg(format!("command -v {t}")).stdout(Stdio::null()).status().is_ok_and(|s| s.success());
        let missing: Vec<_> = ["Xvfb", "dunst", "dunstctl", "dbus-daemon"].into_iter().filter(|t| !have(t)).collect();
        if !missing.is_empty() {
            assert!(std::env::var("LULL_REQUIRE_TRAY").map_or(true, |v| v != "1"), "LULL_REQUIRE_TRAY=1 but {missing:?} are missing");
            eprintln!("SKIPPED: {missing:?} not installed");
            return;
        }
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let x = lull_e2e::Xvfb::try_start().expect("Xvfb");
        let display = x.display.clone();
        let mut bus =
            Command::new("dbus-daemon").args(["--session", "--nofork", "--print-address=1"]).stdout(Stdio::piped()).spawn().expect("dbus");
        let mut addr = String::new();
        std::io::BufReader::new(bus.stdout.take().expect("bus stdout")).read_line(&mut addr).expect("bus address");
        let _bus = Kill(bus);
        let addr = addr.trim().to_string();
        std::thread::sleep(Duration::from_millis(500));
        let _dunst = Kill(
            Command::new("dunst")
                .env("DISPLAY", &display)
                .env("DBUS_SESSION_BUS_ADDRESS", &addr)
                .stderr(Stdio::null())
                .spawn()
                .expect("dunst"),
        );
        // This test alone uses the session bus variable in this binary.
        std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &addr);
        let m = message_for(&counted(2, 5)).expect("a notice");
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut shown = Err(notify_rust::error::ErrorKind::Msg("not tried".into()).into());
        while Instant::now() < deadline {
            shown = show(&m);
            if shown.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        shown.expect("the daemon took the notice");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Closing all moves the notice into dunst's history, which dunstctl reads.
            let _ = Command::new("dunstctl").arg("close-all").env("DBUS_SESSION_BUS_ADDRESS", &addr).status();
            let out = Command::new("dunstctl").arg("history").env("DBUS_SESSION_BUS_ADDRESS", &addr).output().expect("dunstctl");
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("3 of 5 interruptions left today.") {
                assert!(text.contains("Lull: guest work stopped, you are back"), "{text}");
                break;
            }
            assert!(Instant::now() < deadline, "dunst's history lacks the notice: {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
