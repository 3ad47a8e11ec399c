//! Where a module is compiled: in this process, or in a child process that runs this
//! binary's hidden `compile-policy` command and hands back wasmtime's artifact.
//!
//! The operator compiles in a child (`run` asks for it; the author's commands and
//! tests compile in process). Cranelift's code and scratch heap then never enter the
//! operator: at 1 000 PodSets × 5 pods with three policies loaded (dev cluster,
//! `/proc/PID/pagemap` of the binary's text attributed to its symbols), 4.6 MiB of the
//! 18.3 MiB of the operator's resident code was the compiler's (cranelift-codegen,
//! its x64 assembler, regalloc2, wasmtime's Cranelift glue, gimli). A module that
//! crashes the compiler, or makes it allocate past [`HEAP_LIMIT`], ends the child, and
//! its load is refused with what the child said; the operator serves on.
//!
//! The artifact is native code that wasmtime trusts (its `deserialize` is `unsafe`
//! for that reason): it comes from this same binary over a pipe, or from the
//! operator's own private cache directory ([`super::ArtifactCache`]), never from the
//! network, and wasmtime refuses one built by another version or for another engine
//! configuration.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use wasmtime::component::Component;
use wasmtime::{Engine, InstanceAllocationStrategy};

use super::artifacts::ArtifactCache;
use super::config::config;
use super::digest::Digest;
use super::error::{Error, Result, chain};
use super::limits::Limits;

/// The hidden subcommand the child runs.
pub const COMMAND: &str = "compile-policy";

/// Where [`PolicyEngine::load`](super::PolicyEngine::load) compiles.
#[derive(Clone, Debug, Default)]
pub enum Compiler {
    #[default]
    InProcess,
    /// In a child: `PROGRAM compile-policy --policy-memory-mib N`, the module on its
    /// stdin, the artifact on its stdout, an error on its stderr, its heap capped at
    /// [`HEAP_LIMIT`].
    Child(PathBuf),
}

impl Compiler {
    /// Compiles `bytes` (already checked by [`super::inspect`]) for `engine`, whose
    /// configuration is [`config`]`(limits)`.
    /// With `cache`, a module compiled before (by digest) is loaded from it, and one
    /// compiled now is kept in it.
    pub(super) fn component(
        &self,
        engine: &Engine,
        limits: &Limits,
        bytes: &[u8],
        cache: Option<(&ArtifactCache, &Digest)>,
    ) -> Result<Component> {
        if let Some((cache, digest)) = cache
            && let Some(component) = cache.get(engine, digest)
        {
            return Ok(component);
        }
        let artifact = match (self, cache) {
            (Compiler::InProcess, None) => {
                return Component::new(engine, bytes).map_err(|e| Error::Invalid(chain(&e)));
            }
            (Compiler::InProcess, Some(_)) => {
                engine.precompile_component(bytes).map_err(|e| Error::Invalid(chain(&e)))?
            }
            (Compiler::Child(program), _) => in_child(program, limits, bytes)?,
        };
        if let Some((cache, digest)) = cache {
            cache.put(engine, digest, &artifact);
        }
        // SAFETY: the artifact was compiled from `bytes` by this binary, in this process or
        // its own `compile-policy` child, with the same engine configuration (see the
        // module docs); wasmtime checks its version and configuration before using it.
        unsafe { Component::deserialize(engine, &artifact) }
            .map_err(|e| Error::Engine(format!("loading the compiled module: {}", chain(&e))))
    }
}

fn in_child(program: &PathBuf, limits: &Limits, bytes: &[u8]) -> Result<Vec<u8>> {
    let failed = |e: io::Error| Error::Engine(format!("compiling in a child process ({}): {e}", program.display()));
    let mut child = Command::new(program)
        .args([COMMAND, "--policy-memory-mib", &(limits.memory_bytes >> 20).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(failed)?;
    // The child reads the whole module before it writes anything, so writing first
    // and reading after cannot deadlock.
    let written = child.stdin.take().map(|mut stdin| stdin.write_all(bytes));
    let out = child.wait_with_output().map_err(failed)?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => {
            written.transpose().map_err(failed)?;
            Ok(out.stdout)
        }
        // The compiler refused the module: the same words as compiling in process.
        Some(code) if code == i32::from(REFUSED) => Err(Error::Invalid(said)),
        _ => Err(Error::Invalid(format!("the compiler's process ended with {}: {said}", out.status))),
    }
}

/// The child's exit code when the compiler refuses the module.
const REFUSED: u8 = 3;

/// The heap a child may use (`RLIMIT_DATA`). The largest module the checks before
/// compiling let through (20 000 functions) peaked at 127 MB of RSS compiling in
/// 0.57 s; 100 000 functions (refused before compiling) at 564 MB in 3.6 s.
pub const HEAP_LIMIT: u64 = 1 << 30;

/// The child's side: reads a module from stdin, writes the artifact to stdout. Exits
/// with code 3 and the compiler's error on stderr when the module does not compile;
/// aborts when the compiler asks for more than `heap_limit` bytes of heap.
pub fn serve(limits: &Limits, heap_limit: u64) -> io::Result<u8> {
    limit_heap(heap_limit)?;
    let mut bytes = Vec::new();
    io::stdin().lock().read_to_end(&mut bytes)?;
    // Compiling instantiates nothing: no instance pool, whose table slots alone are
    // 80 MB of writable mapping. How instances are allocated is not part of what the
    // artifact must match.
    let mut config = config(limits);
    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    let engine = Engine::new(&config).map_err(|e| io::Error::other(chain(&e)))?;
    match engine.precompile_component(&bytes) {
        Ok(artifact) => {
            io::stdout().lock().write_all(&artifact)?;
            Ok(0)
        }
        Err(e) => {
            eprintln!("{}", chain(&e));
            Ok(REFUSED)
        }
    }
}

/// Caps this process's heap: private writable memory, which is what the compiler
/// allocates. It would count an instance pool's table slots too, which is why the
/// child's engine has none.
///
/// `RLIMIT_DATA` holds for mappings made after it is set, and the allocator (mimalloc,
/// see `heap.rs`) maps its first arena writable as the process starts, before any code
/// of ours runs: set in place, the cap would not hold within that arena (a 20 000-function
/// module compiled under a 32 MiB cap). So the cap is set, then this process starts
/// again under it (`exec` of the same binary with the same arguments; the image started
/// under the cap finds it set and goes on).
fn limit_heap(bytes: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;

        let mut now = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut now) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if now.rlim_cur <= bytes {
            return Ok(());
        }
        let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
        // SAFETY: setrlimit reads the struct it is given and changes only this
        // process's limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Returns only if the exec failed.
        Err(Command::new("/proc/self/exe").args(std::env::args_os().skip(1)).exec())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = bytes;
        Ok(())
    }
}
