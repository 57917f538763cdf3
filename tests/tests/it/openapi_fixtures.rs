//! Every fixture of `svc-fixtures` checked against the schema that the running service's
//! `/v1/openapi.json` declares for its endpoint and status, so fixtures and service cannot drift
//! apart: a missing required field, a wrong type or an undeclared property fails the check.

use serde_json::{Value, json};
use svc_fixtures::bodies;

use crate::Service;
use crate::openapi_check::{ApiDoc, Body, CONTRACT_OPEN, served_document};

/// Each success fixture with the response it stands for (a fixture may stand for several).
const SUCCESS_BODIES: &[(&str, Body)] = &[
    ("agency.json", Body::of("POST", "/agencies", 201)),
    ("agency.json", Body::of("POST", "/agencies", 200)),
    (
        "agent.json",
        Body::of("POST", "/agents", 201).within("agent"),
    ),
    ("register_agent.json", Body::of("POST", "/agents", 201)),
    ("agents_page.json", Body::of("GET", "/agents", 200)),
    ("session_token.json", Body::of("POST", "/session", 200)),
    (
        "roleplay_session.json",
        Body::of("POST", "/roleplay/session", 200),
    ),
    ("calls_page_roleplay.json", Body::of("GET", "/calls", 200)),
    ("calls_page_real_call.json", Body::of("GET", "/calls", 200)),
    (
        "call_roleplay.json",
        Body::of("GET", "/calls/{callId}", 200),
    ),
    (
        "call_real_call.json",
        Body::of("GET", "/calls/{callId}", 200),
    ),
];

/// Each error code with an endpoint the contract names it for; the status is the fixture's.
const ERROR_ENDPOINTS: &[(&str, &str, &str)] = &[
    ("INVALID_REQUEST", "GET", "/agents"),
    ("DRILL_NOT_FOUND", "POST", "/roleplay/session"),
    ("INVALID_API_KEY", "POST", "/session"),
    ("API_KEY_REVOKED", "POST", "/session"),
    ("INVALID_TOKEN", "POST", "/roleplay/session"),
    ("TOKEN_EXPIRED", "POST", "/roleplay/session"),
    ("TOKEN_ALREADY_USED", "POST", "/roleplay/session"),
    ("IP_NOT_ALLOWED", "GET", "/agents"),
    ("TENANT_INACTIVE", "GET", "/calls"),
    ("TENANT_QUOTA_EXCEEDED", "POST", "/session"),
    ("CALL_NOT_FOUND", "GET", "/calls/{callId}"),
    ("AGENT_NOT_FOUND", "POST", "/session"),
    ("AGENCY_NOT_FOUND", "POST", "/agents"),
    ("AGENT_ALREADY_EXISTS", "POST", "/agents"),
    ("INTERNAL_ERROR", "POST", "/roleplay/session"),
    ("SERVICE_UNAVAILABLE", "POST", "/roleplay/session"),
    ("RATE_LIMITED", "GET", "/calls"),
];

/// The document the service serves, fetched as a user would.
async fn served_json() -> Value {
    served_document(&Service::start().await).await
}

/// The served document, with the contract's open objects.
async fn served_doc() -> ApiDoc {
    ApiDoc::new(served_json().await, CONTRACT_OPEN)
}

fn success_fixture(file: &str) -> Value {
    bodies::all_success()
        .into_iter()
        .find_map(|(name, value)| (name == file).then_some(value))
        .unwrap_or_else(|| panic!("no success fixture {file}"))
}

fn success_body(file: &str) -> Body {
    SUCCESS_BODIES
        .iter()
        .find_map(|(name, body)| (*name == file).then_some(*body))
        .unwrap_or_else(|| panic!("no response listed for {file}"))
}

/// The problems the check reports for success fixture `file` after `change`, as its first
/// listed response.
fn success_problems(doc: &ApiDoc, file: &str, change: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut value = success_fixture(file);
    change(&mut value);
    doc.check(file, success_body(file), &value)
}

/// The problems the check reports for the error fixture of `code` after `change`.
fn error_problems(doc: &ApiDoc, code: &str, change: impl FnOnce(&mut Value)) -> Vec<String> {
    let (status, mut value) = bodies::error(code).expect("every contract code has a fixture");
    let (_, method, path) = ERROR_ENDPOINTS
        .iter()
        .find(|(listed, _, _)| *listed == code)
        .unwrap_or_else(|| panic!("{code} has no endpoint listed here"));
    change(&mut value);
    let file = format!("errors/{code}.json");
    doc.check(&file, Body::of(method, path, status), &value)
}

#[tokio::test]
async fn every_fixture_matches_the_schema_the_service_documents_for_its_response() {
    let doc = served_doc().await;
    let mut problems = Vec::new();
    for (file, _) in &bodies::all_success() {
        assert!(
            SUCCESS_BODIES.iter().any(|(name, _)| name == file),
            "{file} has no response listed here"
        );
    }
    for (file, body) in SUCCESS_BODIES {
        problems.extend(doc.check(file, *body, &success_fixture(file)));
    }
    for (code, _) in bodies::ERROR_CODES {
        problems.extend(error_problems(&doc, code, |_| {}));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[tokio::test]
async fn a_fixture_missing_a_required_field_is_reported_with_its_pointer() {
    let doc = served_doc().await;
    let problems = success_problems(&doc, "register_agent.json", |v| {
        v["agency"].as_object_mut().expect("agency").remove("name");
    });
    assert_eq!(
        problems,
        [
            "register_agent.json at /agency/name: required by the schema but missing (as POST /agents 201)"
        ]
    );
}

#[tokio::test]
async fn a_fixture_with_a_wrong_type_is_reported_with_its_pointer() {
    let doc = served_doc().await;
    let problems = success_problems(&doc, "calls_page_real_call.json", |v| {
        v["data"][0]["durationSec"] = json!("1300");
    });
    assert_eq!(
        problems,
        [
            r#"calls_page_real_call.json at /data/0/durationSec: "1300" is not of type "integer" (as GET /calls 200)"#
        ]
    );
}

#[tokio::test]
async fn a_fixture_with_an_undeclared_field_is_reported_with_its_pointer() {
    let doc = served_doc().await;
    // The call detail is an `allOf` of the list row and its own fields: both parts' keys pass,
    // a key of neither does not.
    let problems = success_problems(&doc, "call_real_call.json", |v| {
        v["rating"] = json!(5);
    });
    assert_eq!(
        problems,
        ["call_real_call.json at /rating: not declared by the schema (as GET /calls/{callId} 200)"]
    );
    let problems = success_problems(&doc, "agent.json", |v| v["nickname"] = json!("D"));
    assert_eq!(
        problems,
        [
            "agent.json at /nickname: not declared by the schema (as property agent of POST /agents 201)"
        ]
    );
    let problems = error_problems(&doc, "TOKEN_EXPIRED", |v| {
        v["error"]["retryAfter"] = json!(30);
    });
    assert_eq!(
        problems,
        [
            "errors/TOKEN_EXPIRED.json at /error/retryAfter: not declared by the schema (as POST /roleplay/session 401)"
        ]
    );
}

#[tokio::test]
async fn the_document_declares_open_exactly_the_objects_the_contract_declares_open() {
    let doc = served_json().await;
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let open: Vec<&str> = schemas
        .iter()
        .filter(|(_, schema)| {
            schema
                .get("additionalProperties")
                .is_some_and(|other| *other != json!(false))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(open, CONTRACT_OPEN);
}

#[tokio::test]
async fn undeclared_keys_pass_only_on_the_objects_the_contract_and_the_document_declare_open() {
    let served = served_json().await;
    let file = "call_roleplay.json";
    let doc = ApiDoc::new(served.clone(), CONTRACT_OPEN);
    // The fixture's own extra score and turn keys pass, and so do others; declared keys of an
    // open object are still typed, and the call itself stays closed.
    assert_eq!(success_problems(&doc, file, |_| {}), Vec::<String>::new());
    let problems = success_problems(&doc, file, |v| {
        v["score"]["mood"] = json!("calm");
        v["transcript"][0]["pause"] = json!(1.5);
        v["transcript"][1]["startTime"] = json!("0:02");
        v["score"]["compliancePercent"] = json!("90%");
        v["persona"] = json!({ "name": "Margaret" });
    });
    assert_eq!(
        problems,
        [
            "call_roleplay.json at /persona: not declared by the schema (as GET /calls/{callId} 200)",
            r#"call_roleplay.json at /score/compliancePercent: "90%" is not of type "number" (as GET /calls/{callId} 200)"#,
            r#"call_roleplay.json at /transcript/1/startTime: "0:02" is not of type "number" (as GET /calls/{callId} 200)"#,
        ]
    );

    // Checked with no open objects, the fixture's extra keys are reported.
    let all_closed = ApiDoc::new(served.clone(), &[]);
    assert_eq!(
        all_closed.check(file, success_body(file), &success_fixture(file)),
        [
            "call_roleplay.json at /score/talkRatio: not declared by the schema (as GET /calls/{callId} 200)",
            "call_roleplay.json at /transcript/2/sentiment: not declared by the schema (as GET /calls/{callId} 200)",
        ]
    );

    // The openness comes from the document: a Score that no longer declares it is closed.
    let mut score_closed = served.clone();
    score_closed["components"]["schemas"]["Score"]
        .as_object_mut()
        .expect("Score")
        .remove("additionalProperties");
    let doc = ApiDoc::new(score_closed, CONTRACT_OPEN);
    assert_eq!(
        success_problems(&doc, file, |_| {}),
        [
            "call_roleplay.json at /score/talkRatio: not declared by the schema (as GET /calls/{callId} 200)"
        ]
    );

    // An object the contract does not declare open is checked closed even if the document
    // opens it.
    let mut agent_opened = served;
    agent_opened["components"]["schemas"]["Agent"]["additionalProperties"] = json!(true);
    let doc = ApiDoc::new(agent_opened, CONTRACT_OPEN);
    assert_eq!(
        success_problems(&doc, "agent.json", |v| v["nickname"] = json!("D")),
        [
            "agent.json at /nickname: not declared by the schema (as property agent of POST /agents 201)"
        ]
    );
}

#[tokio::test]
async fn agent_already_exists_details_are_checked_for_the_shape_the_contract_gives() {
    let doc = served_doc().await;
    let problems = error_problems(&doc, "AGENT_ALREADY_EXISTS", |v| {
        let details = v["error"]["details"].as_object_mut().expect("details");
        details.remove("agencyId");
        details.insert("matchedOn".into(), json!("fullName"));
    });
    assert_eq!(
        problems,
        [
            "errors/AGENT_ALREADY_EXISTS.json at /error/details/agencyId: required by the schema but missing (as POST /agents 409)",
            r#"errors/AGENT_ALREADY_EXISTS.json at /error/details/matchedOn: "fullName" is not one of "platformAgentId", "npn" or "email" (as POST /agents 409)"#,
        ]
    );
    let problems = error_problems(&doc, "AGENT_ALREADY_EXISTS", |v| {
        v["error"].as_object_mut().expect("error").remove("details");
    });
    assert_eq!(
        problems,
        [
            "errors/AGENT_ALREADY_EXISTS.json at /error/details: required by the schema but missing (as POST /agents 409)"
        ]
    );
}
