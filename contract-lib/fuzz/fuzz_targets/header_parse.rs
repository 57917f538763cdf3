//! Fuzzes the strict X-Service-Signature parser: it must never panic, and whatever it accepts
//! must have a timestamp and at least one 32-byte signature.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc_contract::signature::SignatureHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = SignatureHeader::parse(data) {
        assert!(parsed.timestamp() >= 0);
        assert!(!parsed.signatures().is_empty());
        assert!(parsed.timestamp_text().iter().all(u8::is_ascii_digit));
    }
});
