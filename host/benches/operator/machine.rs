//! What /proc says: the CPU and memory of the control plane's processes, the
//! operator's and the whole machine's.

use podset_test_support as common;

/// Resident memory of `pid` from /proc, in MiB (0 if it cannot be read).
pub fn rss(pid: u32) -> f64 {
    podset_host::heap::resident_bytes(Some(pid)).map_or(0.0, |b| b as f64 / f64::from(1 << 20))
}

/// CPU seconds `pid` has used (user + system).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

/// The machine's CPU time so far, from the first line of /proc/stat (clock ticks).
pub struct Machine {
    busy: f64,
    idle: f64,
}

impl Machine {
    pub fn now() -> Machine {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<f64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0.0))
            .collect();
        let field = |i: usize| ticks.get(i).copied().unwrap_or(0.0);
        // user nice system idle iowait irq softirq steal (guest time is within user).
        let idle = field(3) + field(4);
        let busy = field(0) + field(1) + field(2) + field(5) + field(6) + field(7);
        Machine { busy: busy / 100.0, idle: idle / 100.0 }
    }

    /// CPU seconds the machine spent busy since `before`.
    pub fn busy_since(&self, before: &Machine) -> f64 {
        self.busy - before.busy
    }

    /// The share of the machine's CPU time since `before` that was idle.
    pub fn idle_since(&self, before: &Machine) -> f64 {
        let (busy, idle) = (self.busy - before.busy, self.idle - before.idle);
        if busy + idle > 0.0 { idle / (busy + idle) } else { 0.0 }
    }
}

/// CPU seconds the control plane's `component` has used.
pub fn component_cpu(component: &str) -> f64 {
    cpu_seconds(component_pid(component))
}

/// The pid of the control plane's `component`, from the cluster's state dir.
pub fn component_pid(component: &str) -> u32 {
    let file = common::cluster_dir().join(format!("pids/{component}.pid"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{}: {text:?} is not a pid: {e}", file.display()))
}

/// The machine, as the results' heading names it: its cores and CPU model.
pub fn describe() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cores} cores, {}", model.unwrap_or_else(|| "unknown CPU".into()))
}
