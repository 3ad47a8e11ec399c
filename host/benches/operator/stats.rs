//! Reading a set of figures: sorted, a percentile, the median over rounds.

use std::time::Duration;

/// A duration in seconds, as the tables show times.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `times`, shortest first.
pub fn sorted(times: impl IntoIterator<Item = Duration>) -> Vec<Duration> {
    let mut v: Vec<Duration> = times.into_iter().collect();
    v.sort();
    v
}

/// The `p` quantile (0 to 1) of `sorted`, at the nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// The median over `rounds` of what `f` reads from a round (of two, their mean).
pub fn median<R>(rounds: &[R], f: &dyn Fn(&R) -> f64) -> f64 {
    let v = lowest_first(rounds.iter().map(f));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 0 => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        n => v[n / 2],
    }
}

/// `values`, lowest first (as [`sorted`] for durations).
pub fn lowest_first(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}
