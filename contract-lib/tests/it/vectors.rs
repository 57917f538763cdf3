//! The shared known-answer vectors in fixtures/webhooks/vectors.json.

use std::time::Duration;

use svc_contract::{Keyring, SigningSecret, Tolerance, Verifier, VerifyError, sign};

use crate::helpers::{body_of, vectors};

fn kind(err: &VerifyError) -> &'static str {
    match err {
        VerifyError::MissingHeader => "missing_header",
        VerifyError::MalformedHeader(_) => "malformed_header",
        VerifyError::TimestampTooOld { .. } => "timestamp_too_old",
        VerifyError::TimestampInFuture { .. } => "timestamp_in_future",
        VerifyError::NoMatchingSignature { .. } => "no_matching_signature",
        VerifyError::BodyTooLarge { .. } => "body_too_large",
        // The fixtures file one category for a body that is not a call.scored event; this
        // crate tells an event of another kind (which may be acknowledged, see UnknownEvents)
        // from a body that does not decode.
        VerifyError::InvalidEvent { .. } | VerifyError::UnknownEvent { .. } => "invalid_event",
        _ => "unknown",
    }
}

fn verifier_for(vector: &serde_json::Value) -> Verifier {
    let secret = SigningSecret::new(vector["secret"].as_str().expect("secret")).expect("secret");
    let mut verifier = Verifier::new(Keyring::single(secret));
    if let Some(secs) = vector.get("tolerance").and_then(serde_json::Value::as_u64) {
        verifier = verifier.with_tolerance(Tolerance::Window(Duration::from_secs(secs)));
    }
    if let Some(limit) = vector
        .get("max_body_bytes")
        .and_then(serde_json::Value::as_u64)
    {
        verifier = verifier.with_max_body_bytes(usize::try_from(limit).expect("limit"));
    }
    verifier
}

#[test]
fn sign_reproduces_every_canonical_valid_vector() {
    let all = vectors();
    let valid = all["valid"].as_array().expect("valid");
    assert!(valid.len() >= 4);
    for v in valid
        .iter()
        .filter(|v| v["name"] != "several_v1_one_matches")
    {
        let body = body_of(v);
        let header = sign(
            v["secret"].as_str().expect("secret"),
            v["t"].as_i64().expect("t"),
            &body,
        );
        assert_eq!(
            header,
            v["header"].as_str().expect("header"),
            "vector {}",
            v["name"]
        );
    }
}

#[test]
fn every_valid_vector_verifies_and_decodes_to_its_body() {
    for v in vectors()["valid"].as_array().expect("valid") {
        let body = body_of(v);
        let header = v["header"].as_str().expect("header");
        let delivery = verifier_for(v)
            .verify(header.as_bytes(), &body, v["now"].as_i64().expect("now"))
            .unwrap_or_else(|err| panic!("vector {} failed: {err}", v["name"]));
        assert_eq!(delivery.key(), "current");
        let event = delivery.decode().expect("decodes");
        let sent: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(event.call_id, sent["callId"].as_str().expect("callId"));
        assert_eq!(
            event.source.as_str(),
            sent["source"].as_str().expect("source")
        );
        assert_eq!(
            event.reason.as_ref().map(|r| r.as_str()),
            sent["reason"].as_str()
        );
        assert_eq!(
            event.platform_agency_id.as_deref(),
            sent["platformAgencyId"].as_str()
        );
    }
}

#[test]
fn every_invalid_vector_fails_for_its_stated_reason() {
    let all = vectors();
    let invalid = all["invalid"].as_array().expect("invalid");
    let mut kinds: Vec<&str> = Vec::new();
    for v in invalid {
        let expected = v["error"].as_str().expect("error");
        kinds.push(expected);
        let body = body_of(v);
        let now = v["now"].as_i64().expect("now");
        let result = match v["header"].as_str() {
            None => Err(VerifyError::MissingHeader),
            Some(header) => verifier_for(v)
                .verify(header.as_bytes(), &body, now)
                .and_then(|d| d.decode()),
        };
        let err = result.expect_err(&format!("vector {} must fail", v["name"]));
        assert_eq!(kind(&err), expected, "vector {}: {err}", v["name"]);
    }
    for reason in [
        "missing_header",
        "malformed_header",
        "timestamp_too_old",
        "timestamp_in_future",
        "no_matching_signature",
        "body_too_large",
        "invalid_event",
    ] {
        assert!(kinds.contains(&reason), "no negative vector for {reason}");
    }
}

#[test]
fn mismatch_hints_point_at_the_likely_mistake_without_leaking_it() {
    let all = vectors();
    let by_name = |name: &str| {
        all["invalid"]
            .as_array()
            .expect("invalid")
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
    };
    for (name, expected) in [
        ("body_trailing_newline", "ends with a newline"),
        ("body_reserialised", "re-serialised"),
        ("wrong_secret", "copied whole"),
    ] {
        let v = by_name(name).expect("vector");
        let err = verifier_for(&v)
            .verify(
                v["header"].as_str().expect("h").as_bytes(),
                &body_of(&v),
                v["now"].as_i64().expect("n"),
            )
            .expect_err("mismatch");
        assert!(err.to_string().contains(expected), "{name}: {err}");
        assert!(!err.to_string().contains("whsec_fixture"));
        assert_eq!(err.public_message(), "invalid signature");
        assert_eq!(err.http_status(), 401);
    }
}

#[test]
fn a_previous_key_verifies_until_its_expiry_and_is_reported_by_name() {
    let body = br#"{"event":"call.scored"}"#;
    let header = sign("whsec_old", 1_000, body);
    let keyring = Keyring::new()
        .with_key("current", SigningSecret::new("whsec_new").expect("secret"))
        .with_expiring_key(
            "previous",
            SigningSecret::new("whsec_old").expect("secret"),
            1_100,
        );
    let verifier = Verifier::new(keyring).with_tolerance(Tolerance::Disabled);
    let ok = verifier
        .verify(header.as_bytes(), body, 1_100)
        .expect("before expiry");
    assert_eq!(ok.key(), "previous");
    let err = verifier
        .verify(header.as_bytes(), body, 1_101)
        .expect_err("after expiry");
    assert!(
        err.to_string()
            .contains("key 'previous', which has expired"),
        "{err}"
    );
}

#[test]
fn secrets_never_show_in_debug_output() {
    let secret = SigningSecret::new("whsec_topsecret").expect("secret");
    let keyring = Keyring::single(secret.clone());
    let verifier = Verifier::new(keyring.clone());
    for text in [
        format!("{secret:?}"),
        format!("{keyring:?}"),
        format!("{verifier:?}"),
    ] {
        assert!(!text.contains("topsecret"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}

#[test]
fn secrets_of_the_wrong_form_are_refused_with_a_reason() {
    for (bad, why) in [
        ("fixture", "starts with"),
        ("whsec_", "empty"),
        ("whsec_abc\n", "whitespace"),
        // Whitespace is reported before the prefix, so a pasted leading newline says so.
        (" whsec_abc", "whitespace"),
    ] {
        let err = SigningSecret::new(bad).expect_err(bad);
        assert!(err.to_string().contains(why), "{bad:?}: {err}");
    }
}

#[test]
fn a_zero_tolerance_is_a_window_and_only_disabled_turns_the_check_off() {
    let body = b"{}";
    let header = sign("whsec_fixture", 1_000, body);
    let keyring = Keyring::single(SigningSecret::new("whsec_fixture").expect("secret"));
    let zero = Verifier::new(keyring.clone()).with_tolerance(Tolerance::Window(Duration::ZERO));
    assert!(zero.verify(header.as_bytes(), body, 1_000).is_ok());
    assert!(matches!(
        zero.verify(header.as_bytes(), body, 1_001),
        Err(VerifyError::TimestampTooOld {
            skew_secs: 1,
            tolerance_secs: 0
        })
    ));
    let off = Verifier::new(keyring).with_tolerance(Tolerance::Disabled);
    assert!(off.verify(header.as_bytes(), body, 9_000_000_000).is_ok());
}
