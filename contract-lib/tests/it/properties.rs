//! Property tests: a signature holds for exactly the bytes and timestamp it was made for.

use proptest::prelude::*;
use svc_contract::{Keyring, SigningSecret, Tolerance, Verifier, sign};

fn verifier(secret: &str) -> Verifier {
    Verifier::new(Keyring::single(SigningSecret::new(secret).expect("secret")))
        .with_tolerance(Tolerance::Disabled)
}

fn secret() -> impl Strategy<Value = String> {
    "[A-Za-z0-9+/=_-]{1,40}".prop_map(|s| format!("whsec_{s}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_signed_body_verifies(secret in secret(), t in 0i64..=999_999_999_999, body in proptest::collection::vec(any::<u8>(), 0..600)) {
        let header = sign(&secret, t, &body);
        let delivery = verifier(&secret).verify(header.as_bytes(), &body, t).expect("verifies");
        prop_assert_eq!(delivery.timestamp(), t);
        prop_assert_eq!(delivery.body(), &body[..]);
    }

    #[test]
    fn changing_any_body_byte_fails(secret in secret(), body in proptest::collection::vec(any::<u8>(), 1..600), index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let header = sign(&secret, 1_000, &body);
        let mut altered = body.clone();
        let i = index.index(altered.len());
        altered[i] ^= flip;
        prop_assert!(verifier(&secret).verify(header.as_bytes(), &altered, 1_000).is_err());
    }

    #[test]
    fn changing_t_fails(secret in secret(), t in 0i64..=999_999_999, delta in 1i64..1_000_000, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let signature = sign(&secret, t, &body);
        let v1 = signature.split_once(",v1=").expect("form").1;
        let moved = format!("t={},v1={v1}", t + delta);
        prop_assert!(verifier(&secret).verify(moved.as_bytes(), &body, t).is_err());
    }

    #[test]
    fn changing_any_signature_character_fails(secret in secret(), body in proptest::collection::vec(any::<u8>(), 0..200), index in 0usize..64, replacement in "[0-9a-f]") {
        let header = sign(&secret, 1_000, &body);
        let (prefix, v1) = header.split_once(",v1=").expect("form");
        let mut chars: Vec<char> = v1.chars().collect();
        let new = replacement.chars().next().expect("char");
        prop_assume!(chars[index] != new);
        chars[index] = new;
        let altered = format!("{prefix},v1={}", chars.into_iter().collect::<String>());
        prop_assert!(verifier(&secret).verify(altered.as_bytes(), &body, 1_000).is_err());
    }

    #[test]
    fn a_different_secret_fails(a in secret(), b in secret(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
        prop_assume!(a != b);
        let header = sign(&a, 1_000, &body);
        prop_assert!(verifier(&b).verify(header.as_bytes(), &body, 1_000).is_err());
    }
}
