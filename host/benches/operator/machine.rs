//! What /proc says: the CPU and memory of the control plane's processes, the
//! operator's and the whole machine's.

use podset_test_support as common;

/// Resident memory of `pid` from /proc, in MiB (0 if it cannot be read).
pub fn rss(pid: u32) -> f64 {
    podset_host::heap::resident_bytes(Some(pid)).map_or(0.0, |b| b as f64 / f64::from(1 << 20))
}

/// Where a process's resident memory lies, from /proc/PID/smaps, in MiB: the reason
/// beside a memory row that misses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resident {
    /// Anonymous memory outside the instance pool: the allocator's heap (mimalloc's
    /// arenas and large blocks) and the threads' stacks.
    pub heap: f64,
    /// wasmtime's instance pool: its one reservation (a policy bench's: 1 TiB of
    /// address space; nothing else in the process reserves 64 GiB) and the Wasm memory
    /// images mapped into it.
    pub pool: f64,
    /// File-backed: the binary's code and data, the libraries.
    pub files: f64,
}

impl Resident {
    /// The split of `pid`'s resident memory (zeros if /proc cannot be read).
    pub fn of(pid: u32) -> Resident {
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
        Resident::parse(&smaps)
    }

    fn parse(smaps: &str) -> Resident {
        const POOL_RESERVATION_KIB: f64 = (64u64 << 20) as f64;
        let mut split = Resident::default();
        // Per mapping: its header (range, and the path or name last), then `Key: N kB` lines.
        let (mut size, mut rss, mut in_pool) = (0.0, 0.0, false);
        let mut close = |size: f64, rss: f64, anonymous: f64, in_pool: bool| {
            let mib = |kib: f64| kib / 1024.0;
            if in_pool || size >= POOL_RESERVATION_KIB {
                split.pool += mib(rss);
            } else {
                split.heap += mib(anonymous);
                split.files += mib(rss - anonymous);
            }
        };
        for line in smaps.lines() {
            let mut fields = line.split_whitespace();
            let Some(first) = fields.next() else { continue };
            let kib = || line.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            match first {
                "Size:" => size = kib(),
                "Rss:" => rss = kib(),
                // The last of a mapping's figures that this split reads.
                "Anonymous:" => close(size, rss, kib(), in_pool),
                _ if first.contains('-') && !first.ends_with(':') => {
                    in_pool = line.contains("wasm-memory-image");
                }
                _ => {}
            }
        }
        split
    }
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
