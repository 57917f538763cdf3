//! Whatever body or query a client sends, the answer is `400 INVALID_REQUEST` in the
//! envelope (never a framework 413/415/422 and never a 5xx), and nothing is stored.

use reqwest::header::CONTENT_TYPE;
use serde_json::json;

use crate::helpers::{reply, spawn_app};

/// (what it is, content type, raw body)
fn hostile_bodies() -> Vec<(&'static str, Option<&'static str>, Vec<u8>)> {
    let json = Some("application/json");
    let valid = br#"{"platformAgencyId":"a","name":"A"}"#.to_vec();
    let huge_name = format!(r#"{{"platformAgencyId":"a","name":"{}"}}"#, "x".repeat(300));
    let huge_body = format!(
        r#"{{"platformAgencyId":"a","name":"{}"}}"#,
        "x".repeat(200_000)
    );
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    vec![
        ("empty body", json, Vec::new()),
        ("truncated object", json, b"{\"platformAgencyId\":".to_vec()),
        ("not json", json, b"hello".to_vec()),
        ("trailing garbage", json, [valid.as_slice(), b"}"].concat()),
        ("array", json, b"[]".to_vec()),
        ("string", json, b"\"a\"".to_vec()),
        ("number", json, b"42".to_vec()),
        ("null", json, b"null".to_vec()),
        ("number for a string", json, br#"{"platformAgencyId":1,"name":"A","firstName":"A","lastName":"B","email":"a@b.c"}"#.to_vec()),
        ("array for a string", json, br#"{"platformAgencyId":["a"],"name":"A","firstName":"A","lastName":"B","npn":"1234"}"#.to_vec()),
        ("object for a string", json, br#"{"platformAgencyId":{},"name":"A","firstName":"A","lastName":"B","npn":"1234"}"#.to_vec()),
        ("boolean for a string", json, br#"{"platformAgencyId":"a","name":true,"firstName":true,"lastName":"B","npn":"1234"}"#.to_vec()),
        ("number npn", json, br#"{"platformAgencyId":"a","name":"A","firstName":"A","lastName":"B","npn":12345}"#.to_vec()),
        ("text/plain", Some("text/plain"), valid.clone()),
        ("no content type", None, valid.clone()),
        ("form", Some("application/x-www-form-urlencoded"), b"platformAgencyId=a&name=A".to_vec()),
        ("multipart", Some("multipart/form-data; boundary=x"), b"--x--".to_vec()),
        ("string over the field limit", json, huge_name.into_bytes()),
        ("body over the size limit", json, huge_body.into_bytes()),
        ("deep nesting", json, deep.into_bytes()),
        ("escaped NUL", json, br#"{"platformAgencyId":"a\u0000b","name":"A\u0000","firstName":"A\u0000","lastName":"B","npn":"1234"}"#.to_vec()),
        ("raw NUL byte", json, b"{\"platformAgencyId\":\"a\0\",\"name\":\"A\"}".to_vec()),
        ("invalid UTF-8", json, b"{\"platformAgencyId\":\"\xff\xfe\",\"name\":\"A\"}".to_vec()),
        ("lone surrogate", json, br#"{"platformAgencyId":"\ud800","name":"A"}"#.to_vec()),
        ("unknown field", json, br#"{"platformAgencyId":"a","name":"A","firstName":"A","lastName":"B","npn":"1234","admin":true}"#.to_vec()),
        ("duplicate key", json, br#"{"platformAgencyId":"a","platformAgencyId":"b","name":"A","firstName":"A","lastName":"B","npn":"1234"}"#.to_vec()),
        ("control character", json, br#"{"platformAgencyId":"a\nb","name":"A\u0007","firstName":"A\u0007","lastName":"B","npn":"1234"}"#.to_vec()),
    ]
}

#[tokio::test]
async fn hostile_bodies_are_invalid_request_in_the_envelope_and_store_nothing() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    for path in ["/v1/agencies", "/v1/agents"] {
        for (what, content_type, body) in hostile_bodies() {
            let mut request = app.client.post(app.url(path)).bearer_auth(&tenant.key);
            if let Some(content_type) = content_type {
                request = request.header(CONTENT_TYPE, content_type);
            }
            let reply = reply(request.body(body).send().await.expect("sent")).await;
            assert_eq!(reply.status.as_u16(), 400, "{path} {what}: {}", reply.body);
            reply.expect_error(400, "INVALID_REQUEST");
        }
    }
    let roster = app.get(&tenant, "/v1/agents").await.expect(200);
    assert_eq!(roster["data"], json!([]));
    // "a" was never created by any hostile agency body.
    app.post(
        &tenant,
        "/v1/agencies",
        json!({ "platformAgencyId": "a", "name": "A" }),
    )
    .await
    .expect(201);
    app.shutdown().await;
}

#[tokio::test]
async fn hostile_query_strings_are_invalid_request() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    // Invalid UTF-8 decodes lossily and simply matches nothing; NPN strips non-digits.
    for query in ["?email=%FF%FE", "?npn=%00%001234"] {
        let page = app
            .get(&tenant, &format!("/v1/agents{query}"))
            .await
            .expect(200);
        assert_eq!(page["data"], json!([]));
    }
    for query in [
        "?platformAgentId=a%00b",
        "?limit=%00",
        "?limit=1&limit=2",
        "?agencyId[]=x",
        "?cursor=%00",
    ] {
        let reply = app.get(&tenant, &format!("/v1/agents{query}")).await;
        assert_eq!(reply.status.as_u16(), 400, "{query}: {}", reply.body);
        reply.expect_error(400, "INVALID_REQUEST");
    }
    let long = format!("/v1/agents?platformAgentId={}", "x".repeat(5_000));
    app.get(&tenant, &long)
        .await
        .expect_error(400, "INVALID_REQUEST");
    app.shutdown().await;
}
