//! The wasmtime configuration of the engine that runs policies, and of the child
//! process that compiles for it ([`compile`](super::compile)).

use wasmtime::{InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::Limits;

/// Instances alive at once: the calls the engine runs concurrently, loads, and direct
/// callers (the CLI, tests). Running out makes instantiation fail, not wait.
const POOL_INSTANCES: u32 = 256;

/// Bytes of each pooled memory and table kept resident between instances (reset in
/// place instead of decommitted): a decision's stack, data and heap usually fit, so a
/// fresh instance costs no page faults. Measured with `make bench`: at 100 pods this
/// halves p50 and p99 against decommitting. Policies link a small stack and 1 MiB of
/// initial memory (.cargo/config.toml), so that their heap fits.
const KEEP_RESIDENT: usize = 1 << 20;

/// The engine's configuration, one for the operator's engine and for the child that
/// compiles for it ([`compile`](super::compile)): wasmtime refuses an artifact built
/// under another.
pub(super) fn config(limits: &Limits) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    // Deadlines by epoch: a check on loop back-edges and function entries, far
    // cheaper than fuel metering, and interrupts any loop.
    config.epoch_interruption(true);
    // A fresh instance per decision is affordable when instances come from a
    // pool: slots are mapped once and reset between uses instead of mmap'ed,
    // faulted in and unmapped every time.
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES)
        .total_tables(POOL_INSTANCES * 2)
        .max_memory_size(limits.memory_bytes)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        // Linux ≥ 6.7: reset only the pages a decision dirtied, not all of the
        // kept-resident megabyte. A decision at 5 pods: 14.0 µs without, 11.1 µs
        // with (a scratch probe, 10 000 decisions in a loop).
        .pagemap_scan(wasmtime::Enabled::Auto);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}
