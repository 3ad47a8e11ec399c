//! Tests against the real control plane and node that `make test` starts
//! (`PODSET_TEST_KUBECONFIG`). Built only with the `cluster-tests` feature, so that a
//! plain `cargo test` runs what needs no cluster.

mod acting_as;
mod any_kind;
mod bad_input;
mod chart;
mod cronjob;
mod deploy;
mod hot_swap;
mod kstatus;
mod leader;
mod manifests;
mod memcached;
mod netperf;
mod operator;
mod peers;
mod reach;
mod real_node;
mod registry;
mod reloader;
mod replay;
mod restart;
mod rollout;
mod sequences;
mod shadow;
mod shards;
mod tenant;
mod time_travel;
mod watch_streams;
