//! jev: the deterministic policy layer between an LLM judge's probabilities and an agent's
//! actions. This library holds the domain — canonical JSON, policies, records, decisions,
//! receipts, seals, verification and replay — and never prints, exits or touches the
//! terminal; the `jev` binary is a thin CLI over it.

pub mod calibrate;
pub mod canonical;
pub mod exit;
pub mod fixtures;
pub mod fsutil;
pub mod harness;
pub mod measure;
pub mod policy;
pub mod questions;
pub mod receipt;
pub mod receipts_in;
pub mod record;
pub mod replay;
pub mod seal;
pub mod sign;
pub mod value;
pub mod verify;
