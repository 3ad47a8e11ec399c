//! The measurement. Netperf itself is not in Debian main; iperf3 measures the same
//! quantity (one TCP stream's throughput, client to server). The client runs
//! `iperf3 -c SERVER -t DURATION -i 0 -J --logfile /dev/termination-log`: one JSON
//! report, without per-interval entries so that it fits the kubelet's 4 KiB
//! termination message, which the policy then reads from the pod's status.

use serde::Deserialize;

/// Why a client's report gives no speed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// The report is not iperf3's JSON (or was cut short).
    Unparsable(String),
    /// iperf3 reported an error (it exits 0 with `--logfile` even then).
    Failed(String),
    /// No receiver figure in the report.
    Missing,
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Unparsable(e) => write!(f, "the client's report is not iperf3 JSON: {e}"),
            ReportError::Failed(e) => write!(f, "iperf3 failed: {e}"),
            ReportError::Missing => write!(f, "the client's report has no end.sum_received.bits_per_second"),
        }
    }
}

#[derive(Deserialize)]
struct Report {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    end: Option<End>,
}

#[derive(Deserialize)]
struct End {
    #[serde(default)]
    sum_received: Option<Sum>,
}

#[derive(Deserialize)]
struct Sum {
    bits_per_second: f64,
}

/// The throughput the receiver measured, in bits per second, from an iperf3 JSON
/// report.
pub fn speed(report: &str) -> Result<i64, ReportError> {
    let report: Report = serde_json::from_str(report).map_err(|e| ReportError::Unparsable(e.to_string()))?;
    if let Some(error) = report.error {
        return Err(ReportError::Failed(error));
    }
    let bps = report.end.and_then(|e| e.sum_received).map(|s| s.bits_per_second).ok_or(ReportError::Missing)?;
    if !bps.is_finite() || bps < 0.0 {
        return Err(ReportError::Unparsable(format!("bits_per_second is {bps}")));
    }
    // Whole bits per second; f64 holds any plausible speed exactly enough.
    Ok(bps.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as iperf3 3.12 writes it with `-i 0 -J` (abridged `start`).
    const REPORT: &str = r#"{
        "start": { "connected": [{ "socket": 5, "local_host": "10.244.1.3", "remote_host": "10.244.1.2", "remote_port": 5201 }],
                   "version": "iperf 3.12", "test_start": { "protocol": "TCP", "num_streams": 1, "duration": 10 } },
        "intervals": [],
        "end": {
            "streams": [],
            "sum_sent": { "start": 0, "end": 10.000037, "seconds": 10.000037, "bytes": 17625317376, "bits_per_second": 14100201685.5, "retransmits": 0, "sender": true },
            "sum_received": { "start": 0, "end": 10.000451, "seconds": 10.000037, "bytes": 17625317376, "bits_per_second": 14099617761.7, "sender": true },
            "cpu_utilization_percent": { "host_total": 98.7 }
        }
    }"#;

    #[test]
    fn the_receivers_figure_is_the_speed() {
        assert_eq!(speed(REPORT), Ok(14_099_617_762));
    }

    #[test]
    fn an_error_report_is_a_failure_with_iperfs_message() {
        let report = r#"{ "start": { "connected": [], "version": "iperf 3.12" }, "intervals": [], "end": {},
                          "error": "unable to connect to server: Connection refused" }"#;
        assert_eq!(speed(report), Err(ReportError::Failed("unable to connect to server: Connection refused".into())));
    }

    #[test]
    fn a_truncated_or_foreign_report_is_unparsable() {
        assert!(matches!(speed(&REPORT[..REPORT.len() / 2]), Err(ReportError::Unparsable(_))));
        assert!(matches!(speed("Connecting to host 10.0.0.1, port 5201"), Err(ReportError::Unparsable(_))));
        assert!(matches!(speed(""), Err(ReportError::Unparsable(_))));
    }

    #[test]
    fn a_report_without_a_receiver_sum_has_no_speed() {
        assert_eq!(speed(r#"{ "end": { "sum_sent": { "bits_per_second": 1.0 } } }"#), Err(ReportError::Missing));
        assert_eq!(speed(r#"{ "start": {} }"#), Err(ReportError::Missing));
    }

    #[test]
    fn an_impossible_figure_is_unparsable() {
        let negative = r#"{ "end": { "sum_received": { "bits_per_second": -5.0 } } }"#;
        assert!(matches!(speed(negative), Err(ReportError::Unparsable(_))));
    }
}
