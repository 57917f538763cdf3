//! Shared helpers: the fixture vectors, the test secret and time, a verifier.

use std::path::Path;

use svc_contract::{Keyring, SigningSecret, Verifier};

pub(crate) const SECRET: &str = "whsec_fixture";
pub(crate) const T: i64 = 1_767_225_600;

/// The webhook signature vectors every implementation shares (fixtures/webhooks/vectors.json).
pub(crate) fn vectors() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/webhooks/vectors.json");
    let text = std::fs::read_to_string(path).expect("fixtures/webhooks/vectors.json");
    serde_json::from_str(&text).expect("vectors are JSON")
}

/// A vector's body: `body_hex` decoded, else `body` as it is.
pub(crate) fn body_of(vector: &serde_json::Value) -> Vec<u8> {
    match vector.get("body_hex").and_then(|v| v.as_str()) {
        Some(hex_body) => hex::decode(hex_body).expect("body_hex"),
        None => vector["body"].as_str().expect("body").as_bytes().to_vec(),
    }
}

pub(crate) fn verifier() -> Verifier {
    Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
}
