//! Machine sensors (the edge): CPU and memory from sysinfo, power source and CPU
//! temperature where the OS exposes them, combined with the guests' own usage (read by
//! the guest runtime from its cgroup counters) into a [`Sample`] whose owner figures
//! exclude the guests.
//!
//! Cost matters: the agent samples once a second all day. sysinfo's CPU + memory refresh
//! costs about 0.02 % of a core; the process list (0.5–4 %) is never walked, and
//! temperatures are read only every tenth sample.

use crate::clock::MonoMs;
use crate::sample::Sample;
use std::path::Path;
use sysinfo::{Components, CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

/// A sensor start-up failure.
#[derive(Debug, thiserror::Error)]
pub enum SensorError {
    #[error("system sensors unavailable: {0}")]
    Unavailable(String),
}

/// The guests' usage as the runtime reads it from their cgroups: cumulative CPU time
/// and current memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuestReading {
    pub cpu_us_total: u64,
    pub mem_bytes: u64,
}

/// Reads samples.
pub struct Sensors {
    sys: System,
    components: Option<Components>,
    ncpu: usize,
    count: u64,
    last_guest: Option<(MonoMs, u64)>,
    temp: Option<f32>,
    power_root: std::path::PathBuf,
    /// Whether the last scan found any power supply; machines without one (most
    /// desktops) are rescanned only every minute, for hot-plugged UPSes and docks.
    has_power_supply: bool,
}

/// Samples between rescans of the power supplies on machines that showed none.
const POWER_RESCAN: u64 = 60;

impl Sensors {
    /// Opens the sensors and takes the first CPU reading (utilisation needs two).
    pub fn new() -> Result<Self, SensorError> {
        let kind = RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing().with_usage())
            .with_memory(MemoryRefreshKind::nothing().with_ram().with_swap());
        let sys = System::new_with_specifics(kind).map_err(|e| SensorError::Unavailable(e.to_string()))?;
        let ncpu = sys.cpus().len().max(1);
        let components = Components::new_with_refreshed_list().ok().filter(|c| c.iter().next().is_some());
        Ok(Self {
            sys,
            components,
            ncpu,
            count: 0,
            last_guest: None,
            temp: None,
            power_root: "/sys/class/power_supply".into(),
            has_power_supply: true,
        })
    }

    /// Number of CPUs.
    pub fn cpus(&self) -> usize {
        self.ncpu
    }

    /// Whether a CPU temperature sensor was found.
    pub fn has_temperature(&self) -> bool {
        self.components.is_some()
    }

    /// Takes one sample at `at`, subtracting the guests' usage.
    pub fn sample(&mut self, at: MonoMs, guest: GuestReading) -> Sample {
        self.sys.refresh_cpu_usage();
        self.sys.refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram().with_swap());
        let total_cpu = (self.sys.global_cpu_usage() / 100.0).clamp(0.0, 1.0);
        let guest_cpu = match self.last_guest {
            Some((t, prev)) if at > t && guest.cpu_us_total >= prev => {
                let wall_us = (at.0 - t.0) as f64 * 1000.0 * self.ncpu as f64;
                ((guest.cpu_us_total - prev) as f64 / wall_us) as f32
            }
            _ => 0.0,
        }
        .clamp(0.0, 1.0);
        self.last_guest = Some((at, guest.cpu_us_total));
        if self.count.is_multiple_of(10) {
            self.temp = self.read_temperature();
        }
        let on_battery = if self.has_power_supply || self.count.is_multiple_of(POWER_RESCAN) {
            let b = on_battery(&self.power_root);
            self.has_power_supply = b.is_some();
            b
        } else {
            None
        };
        self.count += 1;
        let total = self.sys.total_memory();
        let available = self.sys.available_memory();
        Sample {
            at,
            owner_cpu: (total_cpu - guest_cpu).max(0.0),
            owner_mem_bytes: total.saturating_sub(available).saturating_sub(guest.mem_bytes),
            mem_total_bytes: total,
            mem_available_bytes: available,
            swap_total_bytes: self.sys.total_swap(),
            swap_free_bytes: self.sys.free_swap(),
            guest_cpu,
            guest_mem_bytes: guest.mem_bytes,
            on_battery,
            cpu_temp_c: self.temp,
            exclusive_program: None,
        }
    }

    fn read_temperature(&mut self) -> Option<f32> {
        let comps = self.components.as_mut()?;
        comps.refresh(false);
        comps.iter().filter_map(|c| c.temperature()).filter(|t| t.is_finite() && *t > 0.0).reduce(f32::max)
    }
}

/// Power source from `/sys/class/power_supply`: `Some(true)` when a battery is
/// discharging and no mains supply is online, `Some(false)` on mains, `None` when the OS
/// reports no power supply at all (many desktops and VMs).
pub fn on_battery(root: &Path) -> Option<bool> {
    let entries = std::fs::read_dir(root).ok()?;
    let (mut mains_online, mut battery_discharging, mut any) = (false, false, false);
    for e in entries.flatten() {
        let p = e.path();
        let kind = std::fs::read_to_string(p.join("type")).unwrap_or_default();
        match kind.trim() {
            "Mains" | "USB" => {
                any = true;
                mains_online |= std::fs::read_to_string(p.join("online")).is_ok_and(|s| s.trim() == "1");
            }
            "Battery" => {
                any = true;
                battery_discharging |= std::fs::read_to_string(p.join("status")).is_ok_and(|s| s.trim() == "Discharging");
            }
            _ => {}
        }
    }
    any.then_some(battery_discharging && !mains_online)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supply(dir: &Path, name: &str, kind: &str, file: &str, value: &str) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("type"), kind).unwrap();
        std::fs::write(d.join(file), value).unwrap();
    }

    #[test]
    fn power_source_from_sysfs_layout() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(on_battery(t.path()), None, "no supplies: unknown");
        supply(t.path(), "BAT0", "Battery\n", "status", "Discharging\n");
        assert_eq!(on_battery(t.path()), Some(true));
        supply(t.path(), "AC", "Mains\n", "online", "1\n");
        assert_eq!(on_battery(t.path()), Some(false));
    }

    #[test]
    fn real_sample_is_sane() {
        let mut s = Sensors::new().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(250));
        let x = s.sample(MonoMs(1000), GuestReading::default());
        assert!(x.mem_total_bytes > 0 && x.mem_available_bytes <= x.mem_total_bytes);
        assert!((0.0..=1.0).contains(&x.owner_cpu));
        assert!(x.owner_mem_bytes <= x.mem_total_bytes);
    }

    #[test]
    fn guest_usage_is_subtracted() {
        let mut s = Sensors::new().unwrap();
        s.sample(MonoMs(1000), GuestReading { cpu_us_total: 0, mem_bytes: 0 });
        // A guest that used one full CPU for the whole second on an n-CPU machine.
        let n = s.cpus() as u64;
        let x = s.sample(MonoMs(2000), GuestReading { cpu_us_total: 1_000_000, mem_bytes: 1 << 20 });
        assert!((x.guest_cpu - 1.0 / n as f32).abs() < 0.01, "{}", x.guest_cpu);
        assert!(x.owner_cpu <= 1.0 - x.guest_cpu + 1e-6);
    }
}
