//! Parsing of short human durations (`1s`, `500ms`, `2m`) for the flags; a bare number is seconds.
//! Hand-rolled because it is a dozen lines and spares a dependency.

use std::time::Duration;

pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?}: expected a number followed by ms, s, m or h"))?;
    let per_unit_ms = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use ms, s, m or h)")),
    };
    n.checked_mul(per_unit_ms).map(Duration::from_millis).ok_or_else(|| format!("{s:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("").is_err());
        assert!(parse("s").is_err());
        assert!(parse("1x").is_err());
        assert!(parse("-1s").is_err());
        assert!(parse("99999999999999999999h").is_err());
    }
}
