//! Fuzzes verification: arbitrary header and body bytes must never panic and never verify,
//! and a body signed with the fixture secret must always verify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use svc_contract::{Keyring, SigningSecret, Tolerance, Verifier, sign};

fuzz_target!(|data: &[u8]| {
    let Ok(secret) = SigningSecret::new("whsec_fuzz") else {
        return;
    };
    let verifier = Verifier::new(Keyring::single(secret)).with_tolerance(Tolerance::Disabled);
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (header, body) = data.split_at(split);
    assert!(verifier.verify(header, body, 1_767_225_600).is_err());
    let signed = sign("whsec_fuzz", 1_767_225_600, body);
    assert!(
        verifier
            .verify(signed.as_bytes(), body, 1_767_225_600)
            .is_ok()
    );
});
