//! Seed 000 §5.1's node-level simulation: a compute-bound foreign job lingering at the
//! lowest priority beside an owner whose processor requests come as run and idle bursts,
//! at the granularity of scheduler dispatches.
//!
//! The owner's work at utilisation `u` is an alternation of run bursts and idle bursts,
//! each drawn from a two-stage hyper-exponential distribution fitted by its mean and
//! squared coefficient of variation (seed 000 §4.1, "method-of-moment estimate"). The
//! foreign job takes the processor in every idle burst and gives it up the instant a
//! local burst starts (strict priority); each such switch costs the *effective context
//! switch time* `c` (register and cache reload): the local burst finishes `c` later (its
//! delay), and the foreign job loses `c` of each idle burst it is switched into.
//!
//! * **LDR** (local job delay ratio): total delay over total local run time.
//! * **FCSR** (fine-grained cycle stealing ratio): foreign run time over idle time.
//!
//! Seed 000's burst means and variances per utilisation level (its Fig. 4) are an image
//! our copy lacks; [`BurstModel`] is therefore ours and every report that uses it lists
//! it and sweeps it.

use crate::rng::Rng;

/// The owner's fine-grained bursts (ours; see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstModel {
    /// Mean local run burst, seconds (the idle mean follows from the utilisation:
    /// `run · (1 − u) / u`).
    pub run_mean_s: f64,
    /// Squared coefficient of variation of both burst lengths (1 = exponential).
    pub cv2: f64,
}

impl Default for BurstModel {
    /// 10 ms run bursts (seed 001 §5.1's scheduling time slice), CV² = 4.
    fn default() -> Self {
        BurstModel { run_mean_s: 0.010, cv2: 4.0 }
    }
}

/// What a node-level run measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeResult {
    /// Local job delay ratio: delay / local run time.
    pub ldr: f64,
    /// Fine-grained cycle stealing ratio: foreign run time / idle time.
    pub fcsr: f64,
    /// Delay to local bursts per second of wall time (for scaling a trace's seconds).
    pub delay_per_s: f64,
}

/// A draw from a two-stage hyper-exponential with mean `m` and squared CV `cv2` (balanced
/// means; an exponential when `cv2 <= 1`).
fn hyperexp(r: &mut Rng, m: f64, cv2: f64) -> f64 {
    if cv2 <= 1.0 {
        return r.exp(m);
    }
    let p = 0.5 * (1.0 + ((cv2 - 1.0) / (cv2 + 1.0)).sqrt());
    if r.chance(p) {
        r.exp(m / (2.0 * p))
    } else {
        r.exp(m / (2.0 * (1.0 - p)))
    }
}

/// Simulates `seconds` of one node at owner utilisation `u` (0 < u < 1) with a foreign
/// job always runnable and effective context-switch time `switch_s`.
pub fn simulate_node(u: f64, switch_s: f64, model: BurstModel, seconds: f64, r: &mut Rng) -> NodeResult {
    if u <= 0.0 {
        return NodeResult { ldr: 0.0, fcsr: 1.0, delay_per_s: 0.0 };
    }
    if u >= 1.0 {
        return NodeResult { ldr: 0.0, fcsr: 0.0, delay_per_s: 0.0 };
    }
    let idle_mean = model.run_mean_s * (1.0 - u) / u;
    let (mut t, mut run, mut idle, mut foreign, mut delay) = (0.0, 0.0, 0.0, 0.0, 0.0);
    while t < seconds {
        let i = hyperexp(r, idle_mean, model.cv2);
        // The foreign job is switched in (losing `c` to the reload) for the idle burst…
        idle += i;
        foreign += (i - switch_s).max(0.0);
        // …and the local burst that ends it pays the switch back.
        let b = hyperexp(r, model.run_mean_s, model.cv2);
        run += b;
        delay += switch_s;
        t += i + b + switch_s;
    }
    NodeResult { ldr: delay / run.max(1e-12), fcsr: foreign / idle.max(1e-12), delay_per_s: delay / t }
}

/// The 21 utilisation levels of seed 000 §4.1 (0, 5, …, 100 %).
pub const LEVELS: usize = 21;

/// Delay per second of wall time at each of the 21 levels (seed `seed`, `seconds`
/// simulated per level): what a coarse trace's second at that level costs its owner.
pub fn delay_table(switch_s: f64, model: BurstModel, seconds: f64, seed: u64) -> [f64; LEVELS] {
    std::array::from_fn(|k| {
        let mut r = Rng::derive(seed, 0xd15 + k as u64);
        simulate_node(k as f64 / 20.0, switch_s, model, seconds, &mut r).delay_per_s
    })
}

/// An owner's burst timeline, consumed as a lingering guest asks for CPU.
struct Owner {
    u: f64,
    model: BurstModel,
    /// In a local run burst (else idle).
    in_run: bool,
    /// Seconds left of the current burst.
    left: f64,
    /// The guest holds the processor (its cache is warm).
    warm: bool,
}

impl Owner {
    fn new(u: f64, model: BurstModel, r: &mut Rng) -> Owner {
        let in_run = r.chance(u);
        let mut o = Owner { u, model, in_run, left: 0.0, warm: false };
        o.left = o.draw(r);
        o
    }
    fn draw(&self, r: &mut Rng) -> f64 {
        let m = if self.in_run { self.model.run_mean_s } else { self.model.run_mean_s * (1.0 - self.u) / self.u };
        hyperexp(r, m, self.model.cv2)
    }
    fn flip(&mut self, r: &mut Rng) {
        self.in_run = !self.in_run;
        self.warm = false;
        self.left = self.draw(r);
    }
    /// Wall time until the guest has had `need` seconds of CPU (switch costs included).
    fn serve(&mut self, mut need: f64, switch_s: f64, r: &mut Rng) -> f64 {
        let mut wall = 0.0;
        loop {
            if self.in_run {
                wall += self.left + switch_s;
                self.flip(r);
                continue;
            }
            let reload = if self.warm { 0.0 } else { switch_s };
            if self.left - reload >= need {
                wall += reload + need;
                self.left -= reload + need;
                self.warm = true;
                return wall;
            }
            need -= (self.left - reload).max(0.0);
            wall += self.left;
            self.flip(r);
        }
    }
    /// The owner's bursts go on for `dt` while the guest waits at a barrier.
    fn wait(&mut self, mut dt: f64, r: &mut Rng) {
        while dt > self.left {
            dt -= self.left;
            self.flip(r);
        }
        self.left -= dt;
    }
}

/// Seed 000 §7.1's synthetic parallel job: `procs` processes compute `grain_s` between
/// barriers (communication taken as free); `nonidle` of them share their node with an
/// owner at utilisation `u`. Returns the slowdown against `procs` idle nodes over
/// `iterations` phases.
#[allow(clippy::too_many_arguments)] // the model's parameters, one each, as seed 000 §7.1 names them
pub fn bsp_slowdown(
    procs: usize,
    nonidle: usize,
    u: f64,
    grain_s: f64,
    switch_s: f64,
    model: BurstModel,
    iterations: usize,
    r: &mut Rng,
) -> f64 {
    if u <= 0.0 || nonidle == 0 {
        return 1.0;
    }
    let mut owners: Vec<Owner> = (0..nonidle.min(procs)).map(|_| Owner::new(u, model, r)).collect();
    let mut total = 0.0;
    for _ in 0..iterations {
        let walls: Vec<f64> = owners.iter_mut().map(|o| o.serve(grain_s, switch_s, r)).collect();
        let phase = walls.iter().cloned().fold(grain_s, f64::max);
        for (o, w) in owners.iter_mut().zip(&walls) {
            o.wait(phase - w, r);
        }
        total += phase;
    }
    total / (iterations as f64 * grain_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperexponential_draws_have_the_asked_mean_and_spread() {
        let mut r = Rng::new(3);
        let xs: Vec<f64> = (0..200_000).map(|_| hyperexp(&mut r, 2.0, 4.0)).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((m - 2.0).abs() < 0.05, "{m}");
        assert!((v / (m * m) - 4.0).abs() < 0.3, "cv² {}", v / (m * m));
    }

    #[test]
    fn a_switch_per_burst_gives_the_delay_and_the_stolen_share() {
        let mut r = Rng::new(5);
        let model = BurstModel { run_mean_s: 0.010, cv2: 1.0 };
        let n = simulate_node(0.3, 100e-6, model, 200.0, &mut r);
        // One switch per 10-ms burst: 1 % delay; the foreign job loses 100 µs of each
        // ~23-ms idle burst (a little more with short bursts).
        assert!((n.ldr - 0.01).abs() < 0.0005, "{n:?}");
        assert!(n.fcsr > 0.98 && n.fcsr < 0.999, "{n:?}");
        let slow = simulate_node(0.3, 500e-6, model, 200.0, &mut Rng::new(5));
        assert!(slow.ldr > 4.0 * n.ldr && slow.fcsr < n.fcsr);
        assert_eq!(simulate_node(0.0, 1e-4, model, 1.0, &mut r).ldr, 0.0);
    }

    #[test]
    fn a_bulk_synchronous_job_waits_for_its_slowest_node() {
        let m = BurstModel::default();
        let one = bsp_slowdown(8, 1, 0.2, 0.1, 100e-6, m, 400, &mut Rng::new(1));
        // One node at 20 %: the guest gets ~80 % of it, so a phase takes ~1/0.8.
        assert!((1.2..1.4).contains(&one), "{one}");
        let all = bsp_slowdown(8, 8, 0.2, 0.1, 100e-6, m, 400, &mut Rng::new(1));
        assert!(all > one, "eight nonidle nodes: the slowest of eight sets each phase ({all} vs {one})");
        assert_eq!(bsp_slowdown(8, 0, 0.5, 0.1, 100e-6, m, 10, &mut Rng::new(1)), 1.0);
    }
}
