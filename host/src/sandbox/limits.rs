use std::time::Duration;

/// The bounds every policy runs within.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock CPU budget of one call (instantiation included).
    pub deadline: Duration,
    /// Linear memory one instance may grow to.
    pub memory_bytes: usize,
    /// Largest module accepted.
    pub module_bytes: usize,
    /// Most functions (over all its core modules) a module may hold: compiling costs
    /// time and memory in proportion.
    pub max_functions: u64,
    /// Most bytes of data segments a module may hold.
    pub max_data_bytes: u64,
    /// Most actions one decision may return.
    pub max_actions: usize,
    /// Longest string anywhere in a decision's output, but JSON objects.
    pub max_string_bytes: usize,
    /// Longest JSON object (a child or a status) in a decision's output.
    pub max_object_bytes: usize,
    /// Policy calls running at once (each on a blocking thread).
    pub concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_millis(100),
            memory_bytes: 16 << 20,
            module_bytes: 8 << 20,
            max_functions: 20_000,
            max_data_bytes: 4 << 20,
            max_actions: 1_000,
            max_string_bytes: 16 << 10,
            max_object_bytes: 256 << 10,
            concurrency: 4,
        }
    }
}
