//! A practice call driven by `svc-cli`'s client and live transport against the real service:
//! mint, redeem, talk over the WebSocket, end, and read the scored call back.

use std::time::Duration;

use svc_client::{ClientError, MintFor, RedeemRequest};

use crate::Service;
use crate::reconcile::helpers::register_rep;

/// What the rep says in a practice call that scores well.
pub(crate) const SCRIPT: &[&str] = &[
    "Hi, this is Sam Rivera, a licensed insurance agent calling about your Medicare options.",
    "Before we start, this call is being recorded for quality and compliance.",
    "We do not offer every plan available in your area; please contact Medicare.gov or 1-800-MEDICARE for all options.",
    "Which doctors do you see, and what prescriptions do you take?",
    "Based on that, this plan keeps your doctors, covers your prescriptions and has a zero premium.",
    "I understand the concern about cost; your drugs are covered with low copays.",
    "Would you like to enroll today? I can complete the application now.",
];

#[tokio::test]
async fn a_scripted_practice_call_through_the_cli_client_is_scored_and_readable() {
    let service = Service::start().await;
    let client = service.client();
    register_rep(&client).await;
    let token = client
        .mint_session(&MintFor::PlatformAgentId("rep-1".into()))
        .await
        .expect("mint");

    let live = client
        .redeem(
            &token.token,
            &RedeemRequest {
                drill_key: "ma-full-sale".into(),
                difficulty: None,
                filters: None,
            },
        )
        .await
        .expect("redeem");
    assert!(live.call_id.as_str().starts_with("svc_call_"));
    let script: Vec<String> = SCRIPT.iter().map(|line| (*line).to_owned()).collect();
    let finished = svc_client::live::run_call(&live, &script, Duration::from_secs(10))
        .await
        .expect("practice call");
    assert_eq!(finished.call_id, live.call_id);

    // Scoring is asynchronous: the call answers 404 until it is scored.
    let mut detail = None;
    for _ in 0..100 {
        match client.call(&live.call_id).await {
            Ok(call) => {
                detail = Some(call);
                break;
            }
            Err(ClientError::Api(e)) if e.code == "CALL_NOT_FOUND" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reading the call: {e}"),
        }
    }
    let detail = detail.expect("the call is scored within 10 s");
    assert_eq!(detail.status, "scored");
    assert_eq!(detail.row.id, live.call_id);
    // Every line of the script was heard, each answered by the persona.
    assert!(detail.transcript.len() >= SCRIPT.len() * 2);
    assert!(detail.score.overall_score > 50.0, "{:?}", detail.score);

    // The token was single use.
    let replay = client
        .redeem(
            &token.token,
            &RedeemRequest {
                drill_key: "ma-full-sale".into(),
                difficulty: None,
                filters: None,
            },
        )
        .await
        .expect_err("replay");
    assert_eq!(replay.code(), Some("TOKEN_ALREADY_USED"));
}
