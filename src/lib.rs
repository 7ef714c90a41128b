//! jev: the deterministic policy layer between an LLM judge's probabilities and an agent's
//! actions. This library holds the domain — canonical JSON, policies, records, decisions,
//! receipts, seals, verification and replay — and never prints, exits or touches the
//! terminal; the `jev` binary is a thin CLI over it.

pub mod canonical;
pub mod exit;
pub mod fsutil;
pub mod policy;
pub mod receipt;
pub mod receipts_in;
pub mod record;
pub mod replay;
pub mod seal;
pub mod value;
pub mod verify;
