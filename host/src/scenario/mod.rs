//! Decisions written down: scenario files (an input and the decision expected for it),
//! the YAML form of the contract's values, how two decisions compare, and what the
//! kinds' schemas say of a decision's output. The operator writes them
//! (`--record-dir`, shadows) and the author's tools read them (`policy test`,
//! `policy replay`).

pub mod compare;
pub mod file;
pub mod schemas;
pub mod validate;
pub mod yaml;

pub use file::{Failure, Scenario, decided, input_for, write};
pub use yaml::{readable, to_yaml};
