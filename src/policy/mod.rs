//! Policies as data: the format's typed model, the loader that validates a document into it,
//! the evaluator, the safety linter and the lookup of bundled and local policy files.

pub mod eval;
pub mod lint;
pub mod load;
pub mod model;
pub mod registry;
pub mod render;
pub mod transform;

pub use eval::{Decision, OutcomeValue, decide};
pub use load::{PolicyError, load_policy};
pub use model::Policy;

#[cfg(test)]
mod tests;
