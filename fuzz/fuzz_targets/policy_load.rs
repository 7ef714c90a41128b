//! The policy loader and linter on arbitrary text; a policy that loads is also evaluated on an
//! empty record (which must give an error or a decision, never a panic).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(policy) = jev::policy::load_policy(text) else { return };
    let _ = jev::policy::lint::lint(&policy);
    let empty = serde_json::json!({});
    if let Ok(record) = jev::record::parse_record(&policy, &empty) {
        let _ = jev::policy::decide(&policy, &record, &policy.default_params());
    }
});
