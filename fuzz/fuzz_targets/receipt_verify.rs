//! Receipt verification (strict parse, digest, policy binding, re-derivation) and replay on
//! arbitrary text, against the bundled policies.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

static POLICIES: OnceLock<jev::verify::Policies> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let policies = POLICIES.get_or_init(|| jev::verify::Policies::new(None));
    let _ = jev::verify::verify_text(text, policies);
    let from = policies.get("reliability@policy-v1");
    let to = policies.get("reliability@policy-v2");
    if let (Ok(from), Ok(to)) = (from.as_ref(), to.as_ref()) {
        let _ = jev::replay::replay_text("fuzz", text, &jev::replay::Side::Policy(from), &jev::replay::Side::Policy(to));
    }
});
