# Entry points. Every target installs what it needs (see hack/); README.md explains them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help run check docs test ts-bindings go-bindings fuzz-cluster soak image policy policy-crate fixtures bench lint manifests install uninstall deploy undeploy cluster-up cluster-down cluster-status

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

run: ## Run the operator with the default policies (embedded control plane; KUBECONFIG=... or USE_EXISTING_CLUSTER=true: that cluster)
	@hack/run.sh

check: ## The fast checks without a cluster: fmt, clippy, import layers, unit, in-process and scenario tests
	@hack/check.sh

test: ## Everything: make check, then the integration tests and the fault suite on a private control plane
	@hack/test.sh

image: ## Build the operator's image as an OCI archive (target/images/podset-host.oci.tar); push it to the embedded registry when it runs
	@if [ -f .cluster/env ]; then set -a; . .cluster/env; set +a; hack/images.sh --push podset-host; \
	else hack/images.sh podset-host; fi

policy: ## Build the default policy components: target/policy/{podset,memcached,netperf}.wasm
	@hack/policy.sh

policy-crate: ## Build one policy elsewhere (a crate, a TypeScript package or a Go module): make policy-crate CRATE=path/to/guest-NAME
	@hack/policy.sh --crate "$(CRATE)"

fixtures: ## Build the default policy and the hostile test policies
	@hack/policy.sh --fixtures

fuzz-cluster: ## Run SEQUENCE_SEEDS (30) new random sequences of spec changes; FAULT_SEED=N replays one
	@hack/fuzz-cluster.sh

soak: ## SOAK_MINUTES (30) of random faults over SOAK_PARENTS (1000) PodSets; invariants and RSS every minute
	@hack/soak.sh

bench: ## Benchmark the policy sandbox and the operator; prints tables
	@hack/bench.sh

lint: ## cargo fmt --check and clippy -D warnings
	@hack/check.sh --lint

docs: ## Regenerate docs/reference/{cli,metrics}.md from the binary (a test fails when they drift)
	@cargo run -q -p podset-host -- reference cli > docs/reference/cli.md
	@cargo run -q -p podset-host -- reference metrics > docs/reference/metrics.md

ts-bindings: ## Regenerate the TypeScript SDK's contract types (typescript/policy-sdk/src/generated/) from wit/
	@. hack/lib.sh && ts_deps && node typescript/policy-sdk/generate.mjs

go-bindings: ## Regenerate the Go SDK's contract bindings (go/policy-sdk/internal/, go/go-pkg/) from wit/
	@cargo build -q -p go-bindgen && . hack/lib.sh && go_deps && go_bindings go/policy-sdk go/go-pkg

manifests: ## Regenerate manifests/crd/ from the Rust types (the host's and each policy's)
	@cargo run -q -p podset-host -- crd > manifests/crd/podset-host.yaml
	@cargo run -q -p guest-memcached --bin memcached-crdgen > manifests/crd/memcached.yaml
	@cargo run -q -p guest-netperf --bin netperf-crdgen > manifests/crd/netperf.yaml
	@cargo run -q -p guest-tenant --bin tenant-crdgen > manifests/crd/tenant.yaml
	@cargo run -q -p guest-cronjob --bin cronjob-crdgen > manifests/crd/cronjob.yaml
	@cargo run -q -p guest-reloader --bin reloader-crdgen > manifests/crd/configreload.yaml

install: ## Install the CRDs into the cluster of KUBECONFIG
	kubectl apply --server-side -f manifests/crd/

uninstall: ## Remove the CRDs (and with them every PodSet)
	kubectl delete --ignore-not-found -f manifests/crd/

deploy: ## Deploy the operator (2 replicas, leader election): on the embedded cluster, or IMAGE=registry/name:tag on KUBECONFIG's
	@hack/deploy.sh deploy

undeploy: ## Remove what deploy applied (CRDs included)
	@hack/deploy.sh undeploy

cluster-up: ## Start the embedded control plane (.cluster/kubeconfig)
	@hack/cluster.sh up

cluster-down: ## Stop it and remove its state
	@hack/cluster.sh down

cluster-status: ## Show its components; a crashed one with the tail of its log
	@hack/cluster.sh status
