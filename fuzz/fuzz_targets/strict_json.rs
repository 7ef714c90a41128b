//! The strict parser on arbitrary bytes: errors are fine, panics and hangs are not.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jev::canonical::parse_strict(text);
    }
});
