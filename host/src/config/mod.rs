//! Everything `podset-host run` is told: its flags ([`run`]), the flags it shares with
//! the `policy` subcommands ([`shared`]: registries, trusted keys, the sandbox's bounds),
//! and the [`Settings`] the operator is built from, which [`RunArgs::settings`] makes
//! from the flags by reading the files they name and filling in what the environment
//! says ([`settings`]).

pub mod run;
pub mod settings;
pub mod shared;

pub use run::RunArgs;
pub use settings::{LeaderSettings, Settings};
