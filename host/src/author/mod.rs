//! Everything a policy author runs, apart from the operator: the `policy` subcommand
//! ([`cli`], [`command`]) and what it drives — running scenarios and replaying
//! recordings ([`replay`]), benchmarking a decision ([`bench`](mod@bench)), wrapping a core
//! module into a component ([`componentize`]), making a policy crate ([`scaffold`]),
//! publishing, signing and verifying modules in registries ([`publish`]), and a
//! ReconcilePolicy's revisions, rollback and rollout on a cluster ([`lifecycle`]).

pub mod bench;
pub mod cli;
pub mod command;
pub mod componentize;
mod keys;
pub mod lifecycle;
pub mod publish;
pub mod replay;
pub mod scaffold;
pub mod schemas;
