//! A results table: a figure of the peer's beside ours, their ratio, the goal and
//! whether it was met. Rows that compare two sets of rounds are data ([`Row`]), drawn
//! by [`Table::rows`]; a figure measured once is a call ([`Table::ratio`],
//! [`Table::alone`]). A row that misses its goal says beside "miss" what its own
//! figures show of why, where they show it: how many rounds passed, which part of a
//! total grew, how far the decision is from its floor, and for some figures against an
//! absolute goal what their table measured beside them ([`Table::because`]).

use std::fmt::Write as _;

use crate::at_size::Alone;
use crate::machine::Resident;
use crate::metrics::Decisions;
use crate::round::Round;
use crate::sizes::Sizes;
use crate::stats::{lowest_first, median};

/// A table: peer, ours, ratio, goal, pass/fail.
pub struct Table {
    title: String,
    rows: Vec<Line>,
}

/// One row as printed, and the figures a row that misses is explained by.
struct Line {
    cells: [String; 6],
    /// The peer's figure and ours, for a total's parts ("… of which") to be compared.
    figures: Option<(f64, f64, Unit)>,
    /// The ratio that passes, for the rounds beneath to be held to it.
    goal: Option<f64>,
}

impl Line {
    fn new(cells: [String; 6]) -> Line {
        Line { cells, figures: None, goal: None }
    }

    /// "miss" becomes "miss: `why`".
    fn explain(&mut self, why: &str) {
        if self.cells[5] == "miss" {
            self.cells[5] = format!("miss: {why}");
        }
    }
}

/// The label of a total's part: "… of which Events".
const PART: &str = "… of which ";

/// A row comparing two sets of rounds: the peer's (or a baseline's) and ours.
pub struct Row {
    /// The row's label; `{replicas}` stands for the replicas of the rounds' objects.
    pub what: &'static str,
    pub read: Read,
    pub unit: Unit,
    /// The ratio that passes, or for [`Read::Ours`] the figure (lower is better).
    pub goal: Option<f64>,
    /// Beneath it, a row of each round's figures and ratios ([`Read::Medians`] only).
    pub each_round: bool,
}

impl Row {
    /// The medians of `f` over the peer's rounds and over ours, without a goal.
    pub const fn medians(what: &'static str, f: fn(&Round) -> f64, unit: Unit) -> Row {
        Row { what, read: Read::Medians(f), unit, goal: None, each_round: false }
    }

    /// The median of `f` over our rounds alone, without a goal.
    pub const fn ours(what: &'static str, f: fn(&Round) -> f64, unit: Unit) -> Row {
        Row { what, read: Read::Ours(f), unit, goal: None, each_round: false }
    }

    /// This row, passing at `goal` or under.
    pub const fn goal(self, goal: f64) -> Row {
        Row { goal: Some(goal), ..self }
    }

    /// This row, with each round's figures beneath it.
    pub const fn each_round(self) -> Row {
        Row { each_round: true, ..self }
    }
}

/// What a [`Row`] reads from the rounds.
#[derive(Clone, Copy)]
pub enum Read {
    /// The median over the peer's rounds against the median over ours.
    Medians(fn(&Round) -> f64),
    /// The median over our rounds, alone.
    Ours(fn(&Round) -> f64),
    /// Two figures of our rounds against each other (medians): the first in the peer's
    /// column, the second in ours.
    Within(fn(&Round) -> f64, fn(&Round) -> f64),
}

/// How a figure is written.
#[derive(Clone, Copy)]
pub enum Unit {
    /// Seconds, to the hundredth.
    Seconds,
    /// Seconds, written in whole milliseconds.
    Millis,
    /// Milliseconds of CPU time, to the tenth.
    MsCpu,
    /// Microseconds, whole.
    Micros,
    /// Mebibytes, to the tenth.
    MiB,
    /// Kibibytes, to the tenth.
    KiB,
    /// Megabytes, to the hundredth.
    MB,
    /// A count, to the tenth.
    Count,
    /// A share, in percent, to the hundredth.
    Percent,
}

impl Unit {
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Seconds => format!("{v:.2} s"),
            Unit::Millis => format!("{:.0} ms", v * 1000.0),
            Unit::MsCpu => format!("{v:.1} ms"),
            Unit::Micros => format!("{v:.0} µs"),
            Unit::MiB => format!("{v:.1} MiB"),
            Unit::KiB => format!("{v:.1} KiB"),
            Unit::MB => format!("{v:.2} MB"),
            Unit::Count => format!("{v:.1}"),
            Unit::Percent => format!("{v:.2} %"),
        }
    }

    /// `v` with its sign: "+13.0 MiB", "-0.4 MiB".
    pub fn show_signed(self, v: f64) -> String {
        if v < 0.0 { format!("-{}", self.show(-v)) } else { format!("+{}", self.show(v)) }
    }

    /// Several figures, each as [`Unit::show`] writes it, joined by `sep`.
    pub fn show_all(self, vs: &[f64], sep: &str) -> String {
        vs.iter().map(|v| self.show(*v)).collect::<Vec<_>>().join(sep)
    }
}

impl Table {
    pub fn new(title: &str) -> Table {
        Table { title: title.into(), rows: Vec::new() }
    }

    /// The rows that compare `peer`'s rounds with `ours`, in order.
    pub fn rows(&mut self, rows: &[Row], peer: &[Round], ours: &[Round], s: &Sizes) {
        for row in rows {
            let what = row.what.replace("{replicas}", &s.replicas.to_string());
            match row.read {
                Read::Medians(f) => self.ratio(&what, median(peer, &f), median(ours, &f), row.unit, row.goal),
                Read::Ours(f) => self.alone(&what, median(ours, &f), row.unit, row.goal),
                Read::Within(a, b) => self.ratio(&what, median(ours, &a), median(ours, &b), row.unit, row.goal),
            }
            match row.read {
                Read::Medians(f) if row.each_round => self.each_round(peer, ours, f, row.unit),
                _ => debug_assert!(!row.each_round, "{what}: each round is read of medians only"),
            }
        }
    }

    /// The parts of the total in row `i` (the rows after it that start "… of which")
    /// above the peer's, and by how much.
    fn parts_grown(&self, i: usize) -> Vec<String> {
        self.rows[i + 1..]
            .iter()
            .map_while(|l| Some((l.cells[0].strip_prefix(PART)?, l.figures?)))
            .filter(|(_, (peer, ours, _))| ours > peer)
            .map(|(part, (peer, ours, unit))| format!("{part} {}", unit.show_signed(ours - peer)))
            .collect()
    }

    /// A row comparing `ours` with `peer` (lower is better), with the goal a ratio.
    /// A peer's figure of 0 gives no ratio: "—", and no verdict on a goal (the audit-log
    /// rows at 20 000 printed `NaN×` when the API server's log had rotated, 2026-11-30).
    pub fn ratio(&mut self, what: &str, peer: f64, ours: f64, unit: Unit, goal: Option<f64>) {
        let ratio = (peer > 0.0).then(|| ours / peer);
        let shown = ratio.map_or_else(|| "—".into(), |r| format!("{r:.2}×"));
        let (goal_s, verdict) = match (goal, ratio) {
            (Some(g), Some(r)) => (format!("≤ {g:.2}×"), if r <= g { "pass" } else { "miss" }.to_string()),
            (Some(g), None) => (format!("≤ {g:.2}×"), "no peer figure".into()),
            (None, _) => ("—".into(), "—".into()),
        };
        let cells = [what.into(), unit.show(peer), unit.show(ours), shown, goal_s, verdict];
        self.rows.push(Line { cells, figures: Some((peer, ours, unit)), goal });
    }

    /// A decision inside the operator (`d`, means) against the module alone (p50):
    /// `first` against the module back to back (wall time, `goal`), the deciding
    /// thread's CPU time, and against the module with the CPU caches emptied before each
    /// decision, as a decision inside the operator runs: alone between network and JSON
    /// work. That last is the floor a decision between other work can reach: with a
    /// goal, the row passes at or under it (issue 45's "or the measured floor").
    pub fn decisions(&mut self, first: &str, alone: &Alone, d: &Decisions, goal: Option<f64>) {
        let (hot, cold) = (alone.hot.as_secs_f64() * 1e6, alone.cold.as_secs_f64() * 1e6);
        self.ratio(first, hot, d.mean_wall() * 1e6, Unit::Micros, goal);
        if let Some(line) = self.rows.last_mut().filter(|_| cold > 0.0) {
            line.explain(&format!("{:.2}× the floor two rows below", d.mean_wall() * 1e6 / cold));
        }
        self.ratio("… the deciding thread's CPU time (mean)", hot, d.mean_cpu() * 1e6, Unit::Micros, None);
        self.ratio(
            "… against the module alone with the CPU caches emptied first (the floor between other work)",
            cold,
            d.mean_wall() * 1e6,
            Unit::Micros,
            goal.map(|_| 1.0),
        );
    }

    /// Beneath a row of medians: each round's figure of `peer` and of `ours`, lowest
    /// first, and the ratio within each round (the two ran one after the other), so
    /// that a median is read with its spread: the scale-down row read 1.01×, 1.30×,
    /// 1.14× and 1.54× in four runs of `make bench`.
    fn each_round(&mut self, peer: &[Round], ours: &[Round], f: fn(&Round) -> f64, unit: Unit) {
        let ratios = lowest_first(peer.iter().zip(ours).map(|(p, o)| f(o) / f(p)));
        self.each(&lowest_first(peer.iter().map(f)), &lowest_first(ours.iter().map(f)), &ratios, unit);
    }

    /// A row of each round's figures, lowest first, and of the ratios within rounds.
    /// The row above, if it missed its goal, says how many rounds met it.
    pub fn each(&mut self, peer: &[f64], ours: &[f64], ratios: &[f64], unit: Unit) {
        if let Some(line) = self.rows.last_mut()
            && let Some(goal) = line.goal
        {
            let passed = ratios.iter().filter(|r| **r <= goal).count();
            line.explain(&format!("{passed} of {} rounds passed", ratios.len()));
        }
        let show = |vs: &[f64]| unit.show_all(vs, ", ");
        let ratios = ratios.iter().map(|r| format!("{r:.2}×")).collect::<Vec<_>>().join(", ");
        self.rows.push(Line::new([
            "… each round, lowest first".into(),
            show(peer),
            show(ours),
            ratios,
            "—".into(),
            "—".into(),
        ]));
    }

    /// A row of ours alone, against an absolute goal (lower is better).
    pub fn alone(&mut self, what: &str, ours: f64, unit: Unit, goal: Option<f64>) {
        let (goal_s, verdict) = match goal {
            Some(g) => (format!("≤ {}", unit.show(g)), if ours <= g { "pass" } else { "miss" }.to_string()),
            None => ("—".into(), "—".into()),
        };
        self.rows.push(Line::new([what.into(), "—".into(), unit.show(ours), "—".into(), goal_s, verdict]));
    }

    /// The last row, if it missed its goal, says `why` beside "miss": for a row with an
    /// absolute goal, what the table's other figures show of the reason.
    pub fn because(&mut self, why: &str) {
        if let Some(line) = self.rows.last_mut() {
            line.explain(why);
        }
    }

    /// A row of where our resident memory lies (heap / pool / files, MiB).
    pub fn split(&mut self, what: &str, r: &Resident) {
        let ours = Unit::MiB.show_all(&[r.heap, r.pool, r.files], " / ");
        self.rows.push(Line::new([what.into(), "—".into(), ours, "—".into(), "—".into(), "—".into()]));
    }

    /// A row of the peer's figures alone (several, joined), where ours has none.
    pub fn peer(&mut self, what: &str, peer: &[f64], unit: Unit) {
        self.rows.push(Line::new([
            what.into(),
            unit.show_all(peer, " / "),
            "—".into(),
            "—".into(),
            "—".into(),
            "—".into(),
        ]));
    }

    pub fn markdown(&self, peer: &str) -> String {
        let mut out =
            format!("### {}\n\n| | {peer} | ours | ratio | goal | |\n|---|---:|---:|---:|---:|---|\n", self.title);
        for (i, Line { cells: r, .. }) in self.rows.iter().enumerate() {
            let grown = if r[5] == "miss" { self.parts_grown(i) } else { Vec::new() };
            let verdict = if grown.is_empty() { r[5].clone() } else { format!("miss: by part, {}", grown.join(", ")) };
            let _ = writeln!(out, "| {} | {} | {} | {} | {} | {verdict} |", r[0], r[1], r[2], r[3], r[4]);
        }
        out
    }
}
