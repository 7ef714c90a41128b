//! The canonicalizer: canonical output re-parses to the same canonical output (a fixed point),
//! except for doubles in [2^53, 1e21), which print as integer tokens the strict parser refuses
//! by design.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(value) = jev::canonical::parse_strict(text) else { return };
    let once = jev::canonical::canonical_string(&value);
    match jev::canonical::parse_strict(&once) {
        Ok(again) => assert_eq!(jev::canonical::canonical_string(&again), once),
        Err(e) => assert!(e.message.contains("2^53"), "canonical output {once:?} does not re-parse: {e}"),
    }
});
