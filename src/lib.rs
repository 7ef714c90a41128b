//! jev: the deterministic policy layer between an LLM judge's probabilities and an agent's
//! actions. This library holds the domain — canonical JSON, policies, records, decisions —
//! and never prints, exits or touches the terminal; the `jev` binary is a thin CLI over it.

pub mod canonical;
pub mod exit;
pub mod policy;
pub mod record;
pub mod value;
