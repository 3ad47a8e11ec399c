use std::time::Duration;

/// Everything that can go wrong loading or running a policy. Each variant's message
/// says what the policy author or operator can do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("policy module is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },

    #[error("not a WebAssembly binary (it starts with {prefix:02x?}, Wasm starts with \\0asm)")]
    NotWasm { prefix: Vec<u8> },

    #[error(
        "this is a core Wasm module, not a component: build the policy with `make policy`, \
         or wrap it with `podset-host policy componentize`"
    )]
    CoreModule,

    #[error("invalid component: {0}")]
    Invalid(String),

    #[error("the module is too complex to load: {0}")]
    TooComplex(String),

    #[error(
        "the policy imports {imports:?}, outside the allowlist {allowed:?}: policies get no capability but logging"
    )]
    ForbiddenImports { imports: Vec<String>, allowed: Vec<String> },

    #[error("incompatible policy: {0}")]
    Incompatible(String),

    #[error("the policy's declarations are not valid: {0}")]
    InvalidDeclarations(#[from] crate::contract::declarations::Invalid),

    #[error("policy trapped: {0}")]
    Trap(String),

    #[error("policy exceeded its {0:?} deadline and was stopped")]
    DeadlineExceeded(Duration),

    #[error("policy tried to grow its memory to {requested} bytes, over its {limit}-byte limit")]
    OutOfMemory { requested: usize, limit: usize },

    #[error("invalid policy output: {0}")]
    InvalidOutput(String),

    #[error("policy could not decide: {reason}: {message}")]
    Refused { reason: String, message: String },

    #[error("policy engine: {0}")]
    Engine(String),
}

impl Error {
    /// A CamelCase reason for conditions and Events, and a bounded metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::TooLarge { .. } => "ModuleTooLarge",
            Error::NotWasm { .. } => "NotWasm",
            Error::CoreModule => "NotAComponent",
            Error::Invalid(_) => "InvalidComponent",
            Error::TooComplex(_) => "ModuleTooComplex",
            Error::ForbiddenImports { .. } => "ForbiddenImports",
            Error::Incompatible(_) => "IncompatibleContract",
            Error::InvalidDeclarations(_) => "InvalidDeclarations",
            Error::Trap(_) => "PolicyTrapped",
            Error::DeadlineExceeded(_) => "DeadlineExceeded",
            Error::OutOfMemory { .. } => "OutOfMemory",
            Error::InvalidOutput(_) => "InvalidOutput",
            Error::Refused { .. } => "PolicyRefused",
            Error::Engine(_) => "EngineError",
        }
    }

    /// Loading errors are properties of the module: retrying the same bytes cannot help.
    pub fn is_load_error(&self) -> bool {
        matches!(
            self,
            Error::TooLarge { .. }
                | Error::NotWasm { .. }
                | Error::CoreModule
                | Error::Invalid(_)
                | Error::TooComplex(_)
                | Error::ForbiddenImports { .. }
                | Error::Incompatible(_)
                | Error::InvalidDeclarations(_)
        )
    }
}

/// wasmtime's error type is its own; keep its whole chain in the message.
pub(crate) fn chain(e: &wasmtime::Error) -> String {
    format!("{e:#}")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
