//! `lull-bench input-latency`: how long an XTest input event takes to reach the agent's
//! input path and its policy loop.
//!
//! An in-process X11 input backend (the agent's own `x11-xi2`) feeding a real
//! [`InputSink`], with XTest events injected over a separate X connection. Each
//! event's latency is taken at two points: the sink's fast path (the synchronous
//! hook on the input thread that freezes guests) and the receiving end of the sink's
//! channel (where the agent loop hands the event to the policy).

use agent_core::clock::mono_now_us;
use agent_core::input::x11::X11Raw;
use agent_core::input::{InputBackend, InputSink, COALESCE_MS};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use x11rb::connection::Connection;
use x11rb::protocol::xtest::ConnectionExt as _;

/// The core protocol's MotionNotify event code, XTest's "move the pointer".
const MOTION_NOTIFY: u8 = 6;

/// One XTest pointer motion to (x, y), flushed and nothing more: an owner's hand sends
/// no request after it, so no round trip may help the event along.
fn inject(conn: &impl Connection, root: u32, x: i16, y: i16) -> Result<()> {
    conn.xtest_fake_input(MOTION_NOTIFY, 0, 0, root, x, y, 0)?;
    conn.flush()?;
    Ok(())
}

fn seen<E>(r: &Result<u64, E>) -> &'static str {
    if r.is_ok() {
        "saw it"
    } else {
        "timed out"
    }
}

/// The q-quantile of sorted µs figures (the harness's rounded rank), 0 when none.
fn pct(sorted: &[u64], q: f64) -> u64 {
    lull_e2e::percentile::of_sorted(sorted, q).unwrap_or(0)
}

pub fn run(a: InputLatencyArgs) -> Result<()> {
    if a.events < 200 {
        bail!("--events {} is too few: allowed 200..", a.events);
    }
    if a.gap_ms <= COALESCE_MS {
        bail!("--gap-ms {} must exceed the sink's {COALESCE_MS}-ms coalescing, or events would not be forwarded", a.gap_ms);
    }
    let (_xvfb, display) = if a.use_display {
        (None, std::env::var("DISPLAY").context("--use-display but DISPLAY is not set")?)
    } else {
        let x = lull_e2e::Xvfb::try_start()?;
        let d = x.display.clone();
        (Some(x), d)
    };
    // SAFETY (edition 2021: safe fn): set before any other thread of ours reads the
    // environment; the backend thread started below reads DISPLAY.
    std::env::set_var("DISPLAY", &display);

    let (fp_tx, fp_rx) = mpsc::channel::<u64>();
    let fast_path = Arc::new(move |_| {
        let _ = fp_tx.send(mono_now_us());
        false
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = InputSink::new(tx, Some(fast_path));
    let backend = Box::new(X11Raw);
    std::thread::spawn(move || backend.run(sink));
    let (rcv_tx, rcv_rx) = mpsc::channel::<u64>();
    std::thread::spawn(move || {
        while rx.blocking_recv().is_some() {
            if rcv_tx.send(mono_now_us()).is_err() {
                break;
            }
        }
    });

    let (conn, screen) = x11rb::connect(Some(&display)).context("connecting to the X display")?;
    let root = conn.setup().roots[screen].root;
    conn.xtest_get_version(2, 2).context("XTest")?.reply().context("the X server lacks XTest")?;

    // Warm-up: wait until the listener sees injected input at all.
    let mut ready = false;
    for i in 0..100 {
        inject(&conn, root, 100 + (i % 2) as i16, 100)?;
        if fp_rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            ready = true;
            break;
        }
    }
    if !ready {
        bail!("the X11 input backend saw no injected input within 10 s");
    }
    std::thread::sleep(Duration::from_millis(a.gap_ms));
    while fp_rx.try_recv().is_ok() || rcv_rx.try_recv().is_ok() {}

    let bar = indicatif::ProgressBar::new(a.events as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("XTest events {bar:40} {pos}/{len}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut fast, mut policy, mut lost) = (Vec::new(), Vec::new(), 0u32);
    for i in 0..a.events {
        let (x, y) = (200 + (i % 2) as i16 * 50, 200 + (i % 3) as i16 * 20);
        let t0 = mono_now_us();
        inject(&conn, root, x, y)?;
        match (fp_rx.recv_timeout(Duration::from_secs(1)), rcv_rx.recv_timeout(Duration::from_secs(1))) {
            (Ok(f), Ok(r)) => {
                fast.push(f.saturating_sub(t0));
                policy.push(r.saturating_sub(t0));
            }
            (f, r) => {
                lost += 1;
                bar.suspend(|| errln!("event {i}: fast path {}, policy channel {}", seen(&f), seen(&r)));
            }
        }
        bar.inc(1);
        std::thread::sleep(Duration::from_millis(a.gap_ms));
        while fp_rx.try_recv().is_ok() || rcv_rx.try_recv().is_ok() {}
    }
    bar.finish_and_clear();
    fast.sort_unstable();
    policy.sort_unstable();
    report(&a, &fast, &policy, lost);
    if lost > 0 {
        bail!("{lost} of {} events were never seen by the backend", a.events);
    }
    Ok(())
}

/// Prints the sorted latencies (µs) to the fast path and to the policy channel: JSON
/// with `--json`, else a few lines against the goal.
fn report(a: &InputLatencyArgs, fast: &[u64], policy: &[u64], lost: u32) {
    let summary = |v: &[u64]| {
        serde_json::json!({
            "p50_us": pct(v, 0.5), "p99_us": pct(v, 0.99), "max_us": v.last().copied().unwrap_or(0), "min_us": v.first().copied().unwrap_or(0),
        })
    };
    let result = serde_json::json!({
        "events": a.events,
        "measured": fast.len(),
        "lost": lost,
        "gap_ms": a.gap_ms,
        "display": if a.use_display { "DISPLAY" } else { "private Xvfb" },
        "backend": "x11-xi2",
        "to_fast_path": summary(fast),
        "to_policy_channel": summary(policy),
        "goal": {"p99_us": 2000},
    });
    if a.json {
        outln!("{result}");
    } else {
        let ms = |us: u64| us as f64 / 1000.0;
        outln!("XTest event → agent, {} events ({} lost), {} ms apart, backend x11-xi2:", fast.len(), lost, a.gap_ms);
        outln!(
            "  fast path (input thread)   p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            ms(pct(fast, 0.5)),
            ms(pct(fast, 0.99)),
            ms(fast.last().copied().unwrap_or(0))
        );
        outln!(
            "  policy channel (agent loop) p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  · goal p99 ≤ 2 ms",
            ms(pct(policy, 0.5)),
            ms(pct(policy, 0.99)),
            ms(policy.last().copied().unwrap_or(0))
        );
    }
}

#[derive(Args, Debug)]
pub struct InputLatencyArgs {
    /// How many input events to send (at least 200).
    #[arg(long, default_value_t = 300)]
    pub events: u32,
    /// Gap between events, ms; above the sink's 200-ms coalescing so each one is forwarded.
    #[arg(long, default_value_t = 250)]
    pub gap_ms: u64,
    /// Use the X display in $DISPLAY instead of starting a private Xvfb.
    #[arg(long)]
    pub use_display: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}
