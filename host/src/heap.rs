//! Gives memory freed in bulk back to the system: after a compilation, and after a
//! burst of reconciles has drained.
//!
//! glibc's allocator keeps freed memory that is not at the top of a heap. Compiling a
//! component allocates a few MiB that are freed when it is done, so each loaded policy
//! left ~2 MiB more resident than it uses. Measured on an idle operator (one policy
//! against three, `/proc/PID/smaps`): 28.2 against 34.2 MiB before `malloc_trim`,
//! 26.8 against 29.9 MiB after.

/// The process's resident set in bytes, from `/proc/self/statm` (Linux; else `None`).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Returns the free pages of every malloc arena to the system. Costs a walk of the
/// allocator's free lists: for after a burst of work, not for a hot path.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` has no preconditions; it only releases pages the
    // allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn the_resident_set_grows_with_memory_touched() {
        let before = super::resident_bytes().expect("statm is readable");
        let touched = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = super::resident_bytes().expect("statm is readable");
        assert!(after >= before + (32 << 20), "{before} then {after} bytes with 64 MiB touched");
        drop(touched);
    }
}
