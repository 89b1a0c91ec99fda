//! Scenario tests: the pure policy driven in virtual time by readable traces in
//! `tests/scenarios/*.scn` (a script of samples, input and commands in; expected states,
//! directives and counted interruptions out). The trace language is described in
//! `tests/scenarios/README.md`.

use chrono::{DateTime, Duration as CDuration, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use lull_core::clock::{MonoMs, Now};
use lull_core::policy::PolicyConfig as Config;
use lull_core::policy::{Action, Command, DonateSpan, Event, PauseSpan, Policy, Saved};
use lull_core::sample::{InputEvent, InputSignal, Sample};
use std::collections::BTreeMap;

const BOOT: &str = "boot-1";

struct Runner {
    name: String,
    tz: Tz,
    cfg: Config,
    start_utc: DateTime<Utc>,
    /// Virtual monotonic milliseconds.
    mono: u64,
    /// Wall clock offset from "true" time (clock set forwards/backwards).
    skew_ms: i64,
    policy: Option<Policy>,
    /// Actions since the last expectation block.
    actions: Vec<Action>,
    expecting: bool,
    /// The ledger's view: interruptions per budget day.
    ledger: BTreeMap<chrono::NaiveDate, u32>,
    saved: Saved,
    sample: Sample,
    line: usize,
}

fn parse_time(s: &str) -> u64 {
    // @SECONDS, @H:MM:SS, or @1d2h3m4s
    let s = s.trim_start_matches('@');
    if s.contains(':') {
        let parts: Vec<u64> = s.split(':').map(|p| p.parse().expect("number in time")).collect();
        return parts.iter().fold(0, |acc, p| acc * 60 + p) * 1000;
    }
    let mut total = 0u64;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
        } else {
            let v: f64 = num.parse().expect("number in time");
            num.clear();
            total += (v * match c {
                'd' => 86_400_000.0,
                'h' => 3_600_000.0,
                'm' => 60_000.0,
                's' => 1000.0,
                _ => panic!("unknown time unit {c}"),
            }) as u64;
        }
    }
    if !num.is_empty() {
        total += (num.parse::<f64>().expect("number in time") * 1000.0) as u64;
    }
    total
}

fn kv(args: &[&str]) -> BTreeMap<String, String> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (a.to_string(), String::new()),
        })
        .collect()
}

impl Runner {
    fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            tz: chrono_tz::UTC,
            cfg: Config::default(),
            start_utc: Utc.with_ymd_and_hms(2026, 11, 23, 8, 0, 0).unwrap(),
            mono: 1_000_000,
            skew_ms: 0,
            policy: None,
            actions: vec![],
            expecting: false,
            ledger: BTreeMap::new(),
            saved: Saved::default(),
            sample: Sample {
                owner_cpu: 0.02,
                owner_mem_bytes: 4 << 30,
                mem_total_bytes: 16 << 30,
                mem_available_bytes: 10 << 30,
                on_battery: Some(false),
                ..Default::default()
            },
            line: 0,
        }
    }

    fn elapsed(&self) -> u64 {
        self.mono - 1_000_000
    }

    fn now(&self) -> Now {
        let utc = self.start_utc + CDuration::milliseconds(self.elapsed() as i64 + self.skew_ms);
        let local: NaiveDateTime = utc.with_timezone(&self.tz).naive_local();
        Now { mono: MonoMs(self.mono), utc, local }
    }

    fn fail(&self, msg: String) -> ! {
        panic!(
            "scenario {} line {}: {msg}\n  state: {:?}\n  actions since last check: {:#?}",
            self.name,
            self.line,
            self.policy.as_ref().map(|p| p.status(self.now())),
            self.actions
        );
    }

    fn policy(&mut self) -> &mut Policy {
        if self.policy.is_none() {
            let now = self.now();
            let day = self.saved.budget_day.unwrap_or(now.local_date()).max(now.local_date());
            let used = self.ledger.get(&day).copied().unwrap_or(0);
            self.policy = Some(Policy::new(self.cfg.clone(), now, self.saved.clone(), used, BOOT));
        }
        self.policy.as_mut().expect("just created")
    }

    fn feed(&mut self, ev: Event) {
        if self.expecting {
            self.actions.clear();
            self.expecting = false;
        }
        let now = self.now();
        let acts = self.policy().handle(now, ev);
        for a in &acts {
            if let Action::InterruptionCounted(i) = a {
                let n = self.ledger.entry(i.day).or_default();
                *n += 1;
                assert_eq!(*n, i.number, "interruption numbers are consecutive per day");
            }
            if matches!(a, Action::OwnerSettingsChanged | Action::DayRolled { .. } | Action::InterruptionCounted(_)) {
                let now = self.now();
                self.saved = self.policy.as_ref().expect("fed").saved(now, BOOT);
            }
        }
        self.actions.extend(acts);
    }

    fn advance_to(&mut self, t: u64, every: Option<u64>) {
        let target = 1_000_000 + t;
        if target < self.mono {
            self.fail(format!("time goes backwards to @{}s", t / 1000));
        }
        match every {
            Some(step) => {
                // Samples fall on whole multiples of the step since the start.
                let mut next = 1_000_000 + (self.elapsed() / step + 1) * step;
                while next <= target {
                    self.mono = next;
                    next += step;
                    let s = Sample { at: MonoMs(self.mono), ..self.sample.clone() };
                    self.feed(Event::Sample(s));
                }
                self.mono = target;
            }
            None => self.mono = target,
        }
    }

    fn run_line(&mut self, raw: &str) {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return;
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        // Optional leading time: "@90 input" — samples are NOT generated implicitly;
        // "@90 ..." just moves time. "~@90" moves time feeding 1 s samples on the way.
        if let Some(w) = words.first().copied() {
            if let Some(t) = w.strip_prefix("~@") {
                self.advance_to(parse_time(t), Some(1000));
                words.remove(0);
            } else if w.starts_with('@') {
                self.advance_to(parse_time(w), None);
                words.remove(0);
            }
        }
        if words.is_empty() {
            return;
        }
        let (cmd, args) = (words[0], &words[1..]);
        match cmd {
            "config" => {
                let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for a in args {
                    let (k, v) = a.split_once('=').expect("config key=value");
                    let (sec, field) = k.rsplit_once('.').expect("config section.field");
                    sections.entry(sec.to_owned()).or_default().push(format!("{field} = {v}"));
                }
                let text: String = sections.iter().map(|(s, f)| format!("[{s}]\n{}\n", f.join("\n"))).collect();
                self.cfg = toml::from_str::<Config>(&text).unwrap_or_else(|e| self.fail(e.to_string()));
            }
            "tz" => self.tz = args[0].parse().expect("time zone name"),
            "start" => {
                let local = NaiveDateTime::parse_from_str(args[0], "%Y-%m-%dT%H:%M:%S").expect("start YYYY-MM-DDTHH:MM:SS");
                self.start_utc = self.tz.from_local_datetime(&local).earliest().expect("valid local start").with_timezone(&Utc);
            }
            "set" => {
                for (k, v) in kv(args) {
                    match k.as_str() {
                        "cpu" => self.sample.owner_cpu = v.parse::<f32>().expect("cpu %") / 100.0,
                        "mem" => self.sample.owner_mem_bytes = v.parse::<u64>().expect("mem MiB") << 20,
                        "total" => self.sample.mem_total_bytes = v.parse::<u64>().expect("total MiB") << 20,
                        "battery" => self.sample.on_battery = Some(v == "on"),
                        "temp" => self.sample.cpu_temp_c = Some(v.parse().expect("temp")),
                        "program" => self.sample.exclusive_program = (v != "none").then_some(v),
                        _ => self.fail(format!("unknown sample field {k}")),
                    }
                }
            }
            "sample" => {
                let s = Sample { at: MonoMs(self.mono), ..self.sample.clone() };
                self.feed(Event::Sample(s));
            }
            "input" => self.feed(Event::Input(InputEvent { at: MonoMs(self.mono), signal: InputSignal::Activity })),
            "resumed" => self.feed(Event::Input(InputEvent { at: MonoMs(self.mono), signal: InputSignal::Resumed })),
            "idled" => {
                let ms = parse_time(args[0]);
                self.feed(Event::Input(InputEvent { at: MonoMs(self.mono), signal: InputSignal::Idled { idle_for_ms: ms } }))
            }
            "inhibit" => self.feed(Event::Input(InputEvent { at: MonoMs(self.mono), signal: InputSignal::Inhibited(args[0] == "on") })),
            "guests" => self.feed(Event::GuestsPresent(args[0] == "on")),
            "tick" => self.feed(Event::Tick),
            "pause" => {
                let span = match args[0] {
                    "tomorrow" => PauseSpan::UntilTomorrow,
                    "forever" => PauseSpan::UntilResumed,
                    t => PauseSpan::For { secs: parse_time(t) / 1000 },
                };
                self.feed(Event::Command(Command::Pause(span)))
            }
            "resume" => self.feed(Event::Command(Command::Resume)),
            "donate" => {
                let span = match args[0] {
                    "until-return" => DonateSpan::UntilReturn,
                    t => DonateSpan::For { secs: parse_time(t) / 1000 },
                };
                self.feed(Event::Command(Command::Donate(span)))
            }
            "limit" => self.feed(Event::Command(Command::SetLimit(args[0].parse().expect("limit")))),
            "clock" => {
                // Set the wall clock by ±duration; the monotonic clock is unaffected.
                let (neg, t) = match args[0].strip_prefix('-') {
                    Some(t) => (true, t),
                    None => (false, args[0].trim_start_matches('+')),
                };
                let ms = parse_time(t) as i64;
                self.skew_ms += if neg { -ms } else { ms };
            }
            "restart" => {
                // The agent dies (kill -9) and starts again: only the ledger survives.
                self.policy = None;
                if args.first() == Some(&"reboot") {
                    // A reboot: the monotonic clock starts over in a new boot.
                    self.saved = rewrite_boot(&self.saved);
                }
                self.policy();
            }
            "=>" => self.expect(args),
            _ => self.fail(format!("unknown command {cmd}")),
        }
    }

    fn expect(&mut self, args: &[&str]) {
        self.expecting = true;
        let now = self.now();
        let status = self.policy().status(now);
        let what = args[0];
        let rest = &args[1..];
        match what {
            "state" => {
                if status.state.as_str() != rest[0] {
                    self.fail(format!("expected state {}, got {}", rest[0], status.state.as_str()));
                }
            }
            "directive" => {
                let got = serde_json::to_value(status.directive).expect("serializable").as_str().unwrap_or_default().to_owned();
                if got != rest[0] {
                    self.fail(format!("expected directive {}, got {got}", rest[0]));
                }
            }
            "counted" => {
                let want: u32 = rest[0].parse().expect("count");
                if status.interruptions_today != want {
                    self.fail(format!("expected {want} interruptions today, got {}", status.interruptions_today));
                }
            }
            "interruption" => {
                let found = self.actions.iter().find_map(|a| match a {
                    Action::InterruptionCounted(i) => Some(i.clone()),
                    _ => None,
                });
                let Some(i) = found else { self.fail("expected an interruption to be counted".into()) };
                for (k, v) in kv(rest) {
                    let got = match k.as_str() {
                        "cause" => serde_json::to_value(i.cause).expect("serializable").as_str().unwrap_or_default().to_owned(),
                        "number" => i.number.to_string(),
                        "day" => i.day.to_string(),
                        _ => self.fail(format!("unknown interruption field {k}")),
                    };
                    if got != v {
                        self.fail(format!("interruption {k}: expected {v}, got {got}"));
                    }
                }
            }
            "no-interruption" => {
                if self.actions.iter().any(|a| matches!(a, Action::InterruptionCounted(_))) {
                    self.fail("expected no interruption".into());
                }
            }
            "day" => {
                if status.budget_day.to_string() != rest[0] {
                    self.fail(format!("expected budget day {}, got {}", rest[0], status.budget_day));
                }
            }
            "donating-now" => {
                if status.donate_now != (rest[0] == "yes") {
                    self.fail(format!("expected donate_now {}, got {}", rest[0], status.donate_now));
                }
            }
            "not-allowed" => {
                let got =
                    status.not_allowed.map(|r| serde_json::to_value(r).expect("serializable").as_str().unwrap_or_default().to_owned());
                if got.as_deref() != Some(rest[0]) {
                    self.fail(format!("expected not_allowed {}, got {got:?}", rest[0]));
                }
            }
            "exclusive-program" => {
                let got = status.exclusive_program.as_deref().unwrap_or("none");
                if got != rest[0] {
                    self.fail(format!("expected exclusive program {}, got {got}", rest[0]));
                }
            }
            "clock-stepped" => {
                if !self.actions.iter().any(|a| matches!(a, Action::ClockStepped { .. })) {
                    self.fail("expected a clock step to be noticed".into());
                }
            }
            "freeze-on-input" => {
                let got = self.policy().freeze_on_input();
                if got != (rest[0] == "yes") {
                    self.fail(format!("expected freeze_on_input {}, got {got}", rest[0]));
                }
            }
            _ => self.fail(format!("unknown expectation {what}")),
        }
    }
}

fn rewrite_boot(saved: &Saved) -> Saved {
    let mut s = saved.clone();
    let fix = |d: &mut lull_core::policy::Deadline| d.boot_id = "boot-0-before-reboot".into();
    if let Some(lull_core::policy::SavedPause::Until(d)) = &mut s.pause {
        fix(d);
    }
    if let Some(lull_core::policy::SavedDonate::Until(d)) = &mut s.donate {
        fix(d);
    }
    s
}

fn run_scenario(name: &str) {
    let path = format!("{}/tests/scenarios/{name}.scn", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut r = Runner::new(name);
    for (i, line) in text.lines().enumerate() {
        r.line = i + 1;
        r.run_line(line);
    }
    assert!(r.line > 3, "scenario {name} is too short to test anything");
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { run_scenario(stringify!($name)); } )*

        /// A `.scn` file that no test runs would pass unnoticed.
        #[test]
        fn every_scenario_file_is_run() {
            let listed = [$(stringify!($name)),*];
            let dir = format!("{}/tests/scenarios", env!("CARGO_MANIFEST_DIR"));
            for entry in std::fs::read_dir(&dir).expect("scenarios directory") {
                let path = entry.expect("directory entry").path();
                if path.extension().is_some_and(|e| e == "scn") {
                    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
                    assert!(listed.contains(&stem.as_str()), "{} is not listed in scenarios!(…)", path.display());
                }
            }
        }
    };
}

scenarios!(
    recruitment_threshold,
    return_while_donating_lingers,
    immediate_eviction,
    pause_and_migrate,
    budget_exhausted_until_next_day,
    after_guest_window,
    donate_now_for_a_time,
    donate_until_return,
    pause_and_resume,
    not_allowed_rules,
    exclusive_program,
    inhibitor_and_wayland_signals,
    memory_growth,
    clock_midnight_backwards,
    clock_dst,
    restart_keeps_pause_and_count,
    linger_time_migration,
    cpu_out_of_definition,
    cpu_full_below_max,
    lend_while_light,
    lend_while_light_on,
    lend_while_light_stops,
    owner_acts_never_count,
    donate_until_return_input_only,
);
