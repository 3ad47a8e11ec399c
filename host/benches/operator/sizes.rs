//! How big a run is, and which groups it runs: `BENCH_QUICK`, `BENCH_ROUNDS_ONLY`,
//! `BENCH_PEER_ONLY`, `BENCH_SCALE_ONLY`, `BENCH_SEEDS_ONLY`; `BENCH_CURVE` sets the
//! curve's sizes. (`BENCH_RESUME` finishes a full run: [`crate::kept`].)

use std::time::Duration;

/// The sizes of one run of the benchmark.
#[derive(Clone)]
pub struct Sizes {
    pub objects: usize,
    /// Memcacheds in the rounds against the Memcached sample.
    pub memcacheds: usize,
    /// Netperfs beside the PodSets and Memcacheds when the three seeds run at once.
    pub netperfs: usize,
    pub replicas: i32,
    /// Rounds of each group of alternating rounds but the first (the languages', the seeds').
    pub rounds: usize,
    /// Rounds of the first group: the ReplicaSet controller, the operator, its native build
    /// and the operator with a shadow. Five: the median of three moved between 0.89× and
    /// 1.20× the ReplicaSet controller's time from run to run with the same operator
    /// (2026-11-29), as much as the goal's margin.
    pub peer_rounds: usize,
    pub scale_objects: usize,
    pub resync: Duration,
    /// The scale curve: objects at each point, of `CURVE_REPLICAS` pods
    /// (`BENCH_CURVE=100,20000` for others).
    pub curve: Vec<usize>,
    /// Rounds at each size of the curve: `(up to objects, rounds)`, smallest first; one
    /// round above the last. Five at the sizes that converge in seconds: with two, the
    /// 100-object point read 1.05×, 1.01×, 0.98×, 0.90× and 1.07× the ReplicaSet
    /// controller's time in five runs of the same operator (2026-11-29), the spread of a
    /// two-second measurement, as five rounds steadied 200 × 5. Eleven at 100: its five
    /// rounds still spread 0.86× to 1.14× against a median of 1.01× and 1.03× in the runs
    /// of 2026-11-29 22:36 and 2026-11-30 07:40, and a round there costs seconds.
    pub curve_rounds: Vec<(usize, usize)>,
}

/// The variable that sets the curve's sizes, read here and stamped on kept groups.
pub const CURVE: &str = "BENCH_CURVE";

/// Pods per object on the scale curve.
pub const CURVE_REPLICAS: i32 = 2;

/// Pods per Memcached in its rounds.
pub const MEMCACHED_SIZE: i32 = 3;

impl Sizes {
    /// Rounds at `n` objects on the curve.
    pub fn curve_rounds_at(&self, n: usize) -> usize {
        self.curve_rounds.iter().find(|(up_to, _)| n <= *up_to).map_or(1, |(_, rounds)| *rounds)
    }

    /// The curve's rounds, said in words: "5 rounds up to 1000 objects, 2 up to 5000, 1 above".
    pub fn curve_rounds_said(&self) -> String {
        let mut said: Vec<String> = self
            .curve_rounds
            .iter()
            .enumerate()
            .map(|(i, (up_to, rounds))| {
                if i == 0 {
                    format!("{rounds} rounds up to {up_to} objects")
                } else {
                    format!("{rounds} up to {up_to}")
                }
            })
            .collect();
        said.push(if said.is_empty() { "1 round each".into() } else { "1 above".into() });
        said.join(", ")
    }

    /// The Memcacheds' rounds: [`Sizes::memcacheds`] of [`MEMCACHED_SIZE`] pods, the rest
    /// as these.
    pub fn of_memcacheds(&self) -> Sizes {
        Sizes { objects: self.memcacheds, replicas: MEMCACHED_SIZE, ..self.clone() }
    }

    pub fn from_env() -> (Sizes, Run) {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
        let switches = [
            ("BENCH_QUICK", Run::Quick),
            ("BENCH_ROUNDS_ONLY", Run::RoundsOnly),
            ("BENCH_PEER_ONLY", Run::PeerOnly),
            ("BENCH_SCALE_ONLY", Run::ScaleOnly),
            ("BENCH_SEEDS_ONLY", Run::SeedsOnly),
        ];
        // The first switch set, in this order.
        let run = switches.into_iter().find(|(name, _)| set(name)).map_or(Run::Full, |(_, run)| run);
        let sizes = if run == Run::Quick {
            Sizes {
                objects: 10,
                memcacheds: 3,
                netperfs: 2,
                replicas: 2,
                rounds: 1,
                peer_rounds: 1,
                scale_objects: 20,
                resync: Duration::from_secs(5),
                curve: vec![10, 20],
                curve_rounds: vec![],
            }
        } else {
            Sizes {
                objects: 200,
                memcacheds: 50,
                netperfs: 20,
                replicas: 5,
                rounds: 3,
                peer_rounds: 5,
                scale_objects: 1000,
                resync: Duration::from_secs(30),
                curve: vec![100, 1000, 5000, 20000],
                curve_rounds: vec![(100, 11), (1000, 5), (5000, 2)],
            }
        };
        let curve = std::env::var(CURVE).ok().map(|v| {
            v.split(',').map(|n| n.trim().parse().expect("BENCH_CURVE: numbers of objects, comma-separated")).collect()
        });
        (Sizes { curve: curve.unwrap_or(sizes.curve), ..sizes }, run)
    }
}

/// What this run of the benchmark is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Run {
    Full,
    /// `BENCH_QUICK=1`: every group, small.
    Quick,
    /// `BENCH_ROUNDS_ONLY=1`: the alternating rounds only.
    RoundsOnly,
    /// `BENCH_PEER_ONLY=1`: the rounds against the ReplicaSet controller only (the
    /// operator, its native build and the operator with a shadow among them).
    PeerOnly,
    /// `BENCH_SCALE_ONLY=1`: the scale table and the curve only.
    ScaleOnly,
    /// `BENCH_SEEDS_ONLY=1`: the rounds against the seeds' own operators only.
    SeedsOnly,
}

/// The groups of a run, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Group {
    /// The rounds against the ReplicaSet controller.
    Peer,
    /// The PodSet and Memcached policies in each language.
    Languages,
    /// The rounds against the seeds' own operators, and the three at once.
    Seeds,
    /// The scale table and the curve.
    Scale,
}

impl Group {
    pub const ALL: [Group; 4] = [Group::Peer, Group::Languages, Group::Seeds, Group::Scale];

    /// Its name in files and logs.
    pub fn key(self) -> &'static str {
        match self {
            Group::Peer => "peer",
            Group::Languages => "languages",
            Group::Seeds => "seeds",
            Group::Scale => "scale",
        }
    }

    /// Its name in the results' heading.
    pub fn said(self) -> &'static str {
        match self {
            Group::Peer => "the rounds against the ReplicaSet controller",
            Group::Languages => "the languages",
            Group::Seeds => "the seeds' operators",
            Group::Scale => "the scale table and the curve",
        }
    }
}

impl Run {
    /// Whether this run has `group`.
    pub fn runs(self, group: Group) -> bool {
        match self {
            Run::Full | Run::Quick => true,
            Run::RoundsOnly => group != Group::Scale,
            Run::PeerOnly => group == Group::Peer,
            Run::ScaleOnly => group == Group::Scale,
            Run::SeedsOnly => group == Group::Seeds,
        }
    }

    /// What the results' heading says of the run.
    pub fn note(self) -> &'static str {
        match self {
            Run::Full => "",
            Run::Quick => " (BENCH_QUICK=1: a smoke run, sizes not meaningful)",
            Run::RoundsOnly => " (BENCH_ROUNDS_ONLY=1: the alternating rounds only)",
            Run::PeerOnly => " (BENCH_PEER_ONLY=1: the rounds against the ReplicaSet controller only)",
            Run::ScaleOnly => " (BENCH_SCALE_ONLY=1: the scale table and the curve only)",
            Run::SeedsOnly => " (BENCH_SEEDS_ONLY=1: the rounds against the seeds' own operators only)",
        }
    }
}
