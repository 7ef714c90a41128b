//! Exit codes, the same for every subcommand. Tests assert them by name.

/// Everything ran and nothing tripped.
pub const OK: u8 = 0;
/// A gate tripped or a verification failed (lint findings, `--fail-on`, a bad receipt).
pub const FOUND: u8 = 1;
/// Usage or input error: bad arguments, unreadable or invalid files.
pub const INPUT_ERROR: u8 = 2;
/// Only `indeterminate` tripped a `--fail-on` gate.
pub const INDETERMINATE: u8 = 3;
