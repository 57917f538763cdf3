//! The header parser against hostile and mangled input: every case is rejected, none panics.

use proptest::prelude::*;
use svc_contract::signature::SignatureHeader;
use svc_contract::{MalformedHeader, VerifyError, sign};

use crate::helpers::{SECRET, T, verifier};

const SIG: &str = "7609d36a5e343731916ce6181d6ff64c6039f4d4f5633d17017824f7d21727e3";

#[test]
fn hostile_headers_are_rejected_with_the_precise_reason() {
    use MalformedHeader as M;
    let long = format!("t={T},v1={SIG},{}", "x=y,".repeat(300));
    let many = format!("t={T}{}", format!(",v1={SIG}").repeat(9));
    let cases: Vec<(String, MalformedHeader)> = vec![
        (String::new(), M::Empty),
        (long, M::TooLong { max: 1024 }),
        (format!("t={T},\tv1={SIG}"), M::Whitespace),
        (format!("t={T},v1={SIG}\r\n"), M::Whitespace),
        (format!("t={T},v1={SIG}\0"), M::NotPrintableAscii),
        (format!("t=١٢٣,v1={SIG}"), M::NotPrintableAscii),
        (format!(",t={T},v1={SIG}"), M::EmptyElement),
        (format!("t={T},,v1={SIG}"), M::EmptyElement),
        (format!("t={T},v1"), M::ElementWithoutEquals),
        (format!("={T},v1={SIG}"), M::EmptyKey),
        (format!("v1={SIG}"), M::MissingTimestamp),
        (format!("t={T},t={T},v1={SIG}"), M::DuplicateTimestamp),
        (format!("t=,v1={SIG}"), M::TimestampNotDigits),
        (format!("t=0x10,v1={SIG}"), M::TimestampNotDigits),
        (format!("t=1e9,v1={SIG}"), M::TimestampNotDigits),
        (format!("t=-1,v1={SIG}"), M::TimestampNotDigits),
        (format!("t=1=2,v1={SIG}"), M::TimestampNotDigits),
        (
            format!("t=9223372036854775808,v1={SIG}"),
            M::TimestampTooLong { max_digits: 12 },
        ),
        (format!("t={T}"), M::MissingSignature),
        (format!("t={T},v2={SIG}"), M::MissingSignature),
        (format!("t={T},v1="), M::SignatureWrongLength { len: 0 }),
        (
            format!("t={T},v1={SIG}00"),
            M::SignatureWrongLength { len: 66 },
        ),
        (format!("t={T},v1={}", "z".repeat(64)), M::SignatureNotHex),
        (format!("t={T},v1=+{}", &SIG[1..]), M::SignatureNotHex),
        (many, M::TooManySignatures { max: 8 }),
    ];
    for (header, expected) in cases {
        let got = SignatureHeader::parse(header.as_bytes());
        assert_eq!(got, Err(expected), "header {header:?}");
    }
}

#[test]
fn unknown_keys_are_ignored_and_any_v1_may_match() {
    let body = b"{}";
    let good = sign(SECRET, T, body);
    let v1 = good.split_once(",v1=").expect("form").1;
    let header = format!("v0=old,t={T},v1={},scheme=next,v1={v1}", "0".repeat(64));
    assert!(verifier().verify(header.as_bytes(), body, T).is_ok());
    let upper = format!("t={T},v1={}", v1.to_uppercase());
    assert!(verifier().verify(upper.as_bytes(), body, T).is_ok());
}

#[test]
fn a_malformed_header_maps_to_400_and_a_fixed_public_message() {
    let err = verifier()
        .verify(b"t=1,v1=nope", b"{}", T)
        .expect_err("malformed");
    assert!(matches!(err, VerifyError::MalformedHeader(_)));
    assert_eq!(err.http_status(), 400);
    assert_eq!(err.public_message(), "malformed signature header");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_and_never_verify(header in proptest::collection::vec(any::<u8>(), 0..1200), body in proptest::collection::vec(any::<u8>(), 0..64)) {
        prop_assert!(verifier().verify(&header, &body, T).is_err());
    }

    #[test]
    fn header_shaped_noise_never_panics(header in "(t|v1|v0|x)?=?[0-9a-fA-F+ -]{0,70}(,(t|v1)=[0-9a-f]{0,66}){0,4}") {
        let _ = SignatureHeader::parse(header.as_bytes());
        let rejected = verifier().verify(header.as_bytes(), b"{}", T).is_err();
        prop_assert!(rejected);
    }
}
