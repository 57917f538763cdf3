//! Every resource command through the real binary against the fixture server: arguments sent,
//! output in both formats, exit codes.

use serde_json::json;
use svc_fixtures::{bodies, faults, happy, paging, respond};
use wiremock::MockServer;
use wiremock::matchers::{method, path};

use crate::helpers::{Run, Sandbox, received, requests_to};

/// The lower bound every `calls list` here uses.
const FROM: &str = "2026-01-01T00:00:00Z";

async fn happy_server() -> MockServer {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    server
}

/// The happy-path fixture server, and a sandbox pointed at it.
async fn happy_sandbox() -> (MockServer, Sandbox) {
    let server = happy_server().await;
    let sandbox = Sandbox::for_server(&server);
    (server, sandbox)
}

/// Runs `calls list --source SOURCE --from FROM` with `flags` after it.
async fn calls_list(sandbox: &Sandbox, source: &str, flags: &[&str]) -> Run {
    let mut args = vec!["calls", "list", "--source", source, "--from", FROM];
    args.extend_from_slice(flags);
    sandbox.run(&args).await
}

fn body_of(request: &wiremock::Request) -> serde_json::Value {
    serde_json::from_slice(&request.body).expect("JSON body")
}

fn query_of(request: &wiremock::Request) -> Vec<(String, String)> {
    request
        .url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[tokio::test]
async fn agencies_upsert_sends_both_fields_and_prints_the_agency() {
    let (server, sandbox) = happy_sandbox().await;
    let run = sandbox
        .run(&[
            "agencies",
            "upsert",
            "--platform-agency-id",
            "acme-2",
            "--name",
            "Acme Two",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("svc_agency_") && run.stdout.contains("Acme Two"),
        "{run:?}"
    );
    assert!(run.stderr.contains("created"));
    let sent = requests_to(&server, "POST", "/v1/agencies").await;
    assert_eq!(
        body_of(&sent[0]),
        json!({ "platformAgencyId": "acme-2", "name": "Acme Two" })
    );

    // The fixture tenant already has acme-1: the upsert answers 200 with it.
    let run = sandbox
        .run(&[
            "--json",
            "agencies",
            "upsert",
            "--platform-agency-id",
            "acme-1",
            "--name",
            "Acme Insurance",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json(), bodies::agency());
    assert!(!run.stderr.contains("created"), "{run:?}");
}

#[tokio::test]
async fn agents_register_sends_every_field_and_names_the_agency_one_way() {
    let (server, sandbox) = happy_sandbox().await;
    let run = sandbox
        .run(&[
            "--json",
            "agents",
            "register",
            "--first-name",
            "Lee",
            "--last-name",
            "Park",
            "--email",
            "lee.park@acme.example",
            "--npn",
            "55501234",
            "--platform-agent-id",
            "rep-1003",
            "--agency-id",
            "svc_agency_fx0001",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let registered = run.json();
    assert_eq!(registered["agency"], bodies::agency());
    assert_eq!(registered["agent"]["platformAgentId"], json!("rep-1003"));
    assert_eq!(registered["agent"]["agencyId"], json!("svc_agency_fx0001"));
    let sent = requests_to(&server, "POST", "/v1/agents").await;
    assert_eq!(
        body_of(&sent[0]),
        json!({ "firstName": "Lee", "lastName": "Park", "email": "lee.park@acme.example", "npn": "55501234",
                "platformAgentId": "rep-1003", "agencyId": "svc_agency_fx0001" })
    );
}

#[tokio::test]
async fn agents_register_without_a_handle_or_with_both_agency_ids_is_a_usage_error() {
    let (server, sandbox) = happy_sandbox().await;
    let no_handle = sandbox
        .run(&[
            "agents",
            "register",
            "--first-name",
            "A",
            "--platform-agency-id",
            "acme-1",
        ])
        .await;
    assert_eq!(no_handle.code, 2, "{no_handle:?}");
    let both = sandbox
        .run(&[
            "agents",
            "register",
            "--npn",
            "1234",
            "--platform-agency-id",
            "acme-1",
            "--agency-id",
            "svc_agency_fx0001",
        ])
        .await;
    assert_eq!(both.code, 2, "{both:?}");
    assert!(requests_to(&server, "POST", "/v1/agents").await.is_empty());
}

#[tokio::test]
async fn agents_get_takes_exactly_one_handle_and_prints_the_agent() {
    let (server, sandbox) = happy_sandbox().await;
    let two = sandbox
        .run(&[
            "agents",
            "get",
            "--npn",
            "12345678",
            "--email",
            "x@y.example",
        ])
        .await;
    assert_eq!(two.code, 2, "{two:?}");
    let run = sandbox
        .run(&["agents", "get", "--email", "dana.reyes@acme.example"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("svc_agent_fx0001") && run.stdout.contains("Dana"),
        "{run:?}"
    );
    let sent = requests_to(&server, "GET", "/v1/agents").await;
    assert_eq!(sent[0].url.query(), Some("email=dana.reyes%40acme.example"));
}

#[tokio::test]
async fn agents_list_prints_a_page_in_both_formats() {
    let (_server, sandbox) = happy_sandbox().await;
    let run = sandbox
        .run(&[
            "--json",
            "agents",
            "list",
            "--agency-id",
            "svc_agency_fx0001",
            "--all",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["data"], bodies::agents_page()["data"]);
    assert_eq!(run.json()["nextCursor"], json!(null));
    let run = sandbox.run(&["agents", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("svc_agent_fx0002") && run.stderr.contains("2 agent(s)"),
        "{run:?}"
    );
}

#[tokio::test]
async fn session_mint_prints_the_token_and_its_expiry() {
    let (server, sandbox) = happy_sandbox().await;
    let run = sandbox
        .run(&[
            "--json",
            "session",
            "mint",
            "--platform-agent-id",
            "rep-1001",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let minted = run.json();
    assert!(
        minted["token"].as_str().is_some_and(|t| !t.is_empty()),
        "{minted}"
    );
    // The fixtures mint a token that expires five minutes after the request.
    let expires: chrono::DateTime<chrono::Utc> = minted["expiresAt"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("expiresAt");
    let ahead = (expires - chrono::Utc::now()).num_seconds();
    assert!((290..=301).contains(&ahead), "{ahead} s ahead");
    let sent = requests_to(&server, "POST", "/v1/session").await;
    assert_eq!(body_of(&sent[0]), json!({ "platformAgentId": "rep-1001" }));
    let run = sandbox
        .run(&["session", "mint", "--agent-id", "svc_agent_fx0001"])
        .await;
    assert!(
        run.stdout.contains("expiresAt") && run.stdout.contains(".000Z"),
        "{run:?}"
    );
}

#[tokio::test]
async fn a_service_id_of_the_wrong_kind_is_a_usage_error_naming_the_prefix_and_sends_nothing() {
    let (server, sandbox) = happy_sandbox().await;
    let calls_list = ["calls", "list", "--source", "roleplay", "--from", FROM];
    let cases: [(Vec<&str>, &str); 8] = [
        (
            vec!["session", "mint", "--agent-id", "svc_agency_fx0001"],
            "svc_agent_",
        ),
        (
            vec!["agents", "get", "--agent-id", "svc_agency_fx0001"],
            "svc_agent_",
        ),
        (
            vec![
                "agents",
                "get",
                "--npn",
                "12345678",
                "--agency-id",
                "svc_agent_fx0001",
            ],
            "svc_agency_",
        ),
        (
            vec![
                "agents",
                "register",
                "--npn",
                "1234",
                "--agency-id",
                "acme-1",
            ],
            "svc_agency_",
        ),
        (vec!["agents", "list", "--agency-id", ""], "svc_agency_"),
        (
            [&calls_list[..], &["--agent-id", "svc_agency_fx0001"]].concat(),
            "svc_agent_",
        ),
        (
            [&calls_list[..], &["--agency-id", "svc_call_fx0001"]].concat(),
            "svc_agency_",
        ),
        (vec!["calls", "show", "svc_agent_fx0001"], "svc_call_"),
    ];
    for (args, prefix) in cases {
        let run = sandbox.run(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(
            run.stderr.contains(&format!("starting `{prefix}`")),
            "{args:?}: {run:?}"
        );
    }
    assert!(received(&server).await.is_empty());
}

#[tokio::test]
async fn session_mint_over_quota_fails_with_exit_1_after_one_request() {
    let server = MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/session"))
        .respond_with(respond::error("TENANT_QUOTA_EXCEEDED"))
        .named("quota spent")
        .mount(&server)
        .await;
    let run = Sandbox::for_server(&server)
        .run(&["session", "mint", "--agent-id", "svc_agent_fx0001"])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("TENANT_QUOTA_EXCEEDED") && run.stderr.contains("req_"),
        "{run:?}"
    );
    assert_eq!(requests_to(&server, "POST", "/v1/session").await.len(), 1);
}

#[tokio::test]
async fn calls_list_sends_every_filter_and_prints_rows() {
    let (server, sandbox) = happy_sandbox().await;
    let run = calls_list(
        &sandbox,
        "roleplay",
        &[
            "--json",
            "--to",
            "2026-02-01T00:00:00Z",
            "--agent-id",
            "svc_agent_fx0001",
            "--agency-id",
            "svc_agency_fx0001",
            "--external-user-id",
            "rep-1001",
            "--external-agency-id",
            "acme-1",
            "--limit",
            "10",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["data"], bodies::calls_page_roleplay()["data"]);
    let sent = requests_to(&server, "GET", "/v1/calls").await;
    let query = query_of(&sent[0]);
    for (k, v) in [
        ("source", "roleplay"),
        ("from", FROM),
        ("to", "2026-02-01T00:00:00Z"),
        ("agentId", "svc_agent_fx0001"),
        ("agencyId", "svc_agency_fx0001"),
        ("externalUserId", "rep-1001"),
        ("externalAgencyId", "acme-1"),
        ("limit", "10"),
    ] {
        assert!(
            query.contains(&(k.to_owned(), v.to_owned())),
            "{k}={v} missing from {query:?}"
        );
    }
    let run = calls_list(&sandbox, "real_call", &[]).await;
    assert!(
        run.stdout.contains("svc_call_fx0002") && run.stdout.contains("real_call"),
        "{run:?}"
    );
}

#[tokio::test]
async fn calls_list_all_follows_cursors_across_pages() {
    let server = MockServer::start().await;
    let paged = paging::mount_paged_calls(&server, "real_call", 12, 5).await;
    let sandbox = Sandbox::for_server(&server);
    let run = calls_list(&sandbox, "real_call", &["--json", "--limit", "5", "--all"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let ids: Vec<String> = run.json()["data"]
        .as_array()
        .expect("array")
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ids, paged.ids);
}

#[tokio::test]
async fn calls_list_one_page_shows_how_to_get_the_next() {
    let server = MockServer::start().await;
    let paged = paging::mount_paged_calls(&server, "roleplay", 4, 2).await;
    let sandbox = Sandbox::for_server(&server);
    let run = calls_list(&sandbox, "roleplay", &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let cursor = paged.cursors()[0].clone();
    assert!(run.stderr.contains(&cursor), "{run:?}");
    let run = calls_list(&sandbox, "roleplay", &["--json", "--cursor", &cursor]).await;
    assert_eq!(run.json()["data"][0]["id"], json!(paged.ids[2]));
}

#[tokio::test]
async fn calls_list_rejects_bad_arguments_before_sending() {
    let (server, sandbox) = happy_sandbox().await;
    for args in [
        vec![
            "calls",
            "list",
            "--source",
            "roleplay",
            "--from",
            "yesterday",
        ],
        vec!["calls", "list", "--source", "voicemail", "--from", FROM],
        vec!["calls", "list", "--from", FROM],
        vec![
            "calls", "list", "--source", "roleplay", "--from", FROM, "--limit", "500",
        ],
        vec![
            "calls",
            "list",
            "--source",
            "roleplay",
            "--from",
            FROM,
            "--agent-id",
            "a",
            "--platform-agent-id",
            "b",
        ],
    ] {
        let run = sandbox.run(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
    }
    assert!(requests_to(&server, "GET", "/v1/calls").await.is_empty());
}

#[tokio::test]
async fn calls_show_prints_a_real_call_as_a_dialogue_with_score_keys_and_audio() {
    let (_server, sandbox) = happy_sandbox().await;
    let run = sandbox.run(&["calls", "show", bodies::REAL_CALL_ID]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for expected in [
        "[00:02.9 - 00:05.1] customer: Hi, I got a letter about a new plan.",
        "agent: Thanks for calling Acme, this is Dana.",
        "overallScore",
        "88",
        "compliancePercent",
        "complianceScorecard",
        "https://media.invalid/archive/svc_call_fx0002.mp3?sig=fixture",
        "2026-01-16T15:30:02.000Z",
    ] {
        assert!(
            run.stdout.contains(expected),
            "missing {expected:?} in\n{}",
            run.stdout
        );
    }
}

#[tokio::test]
async fn calls_show_json_keeps_unknown_keys_of_a_practice_call() {
    let (_server, sandbox) = happy_sandbox().await;
    let run = sandbox
        .run(&["--json", "calls", "show", bodies::ROLEPLAY_CALL_ID])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let call = run.json();
    assert_eq!(call["score"]["talkRatio"], json!(0.55));
    assert_eq!(call["transcript"][2]["sentiment"], json!("neutral"));
    assert_eq!(call["audioUrl"], json!(null));
    assert!(
        run.stderr.is_empty(),
        "JSON mode keeps stderr quiet on success: {run:?}"
    );
}

#[tokio::test]
async fn calls_show_of_an_unknown_call_is_call_not_found_with_exit_1() {
    let (_server, sandbox) = happy_sandbox().await;
    let run = sandbox.run(&["calls", "show", "svc_call_missing"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("CALL_NOT_FOUND"), "{run:?}");
    assert!(run.stdout.is_empty());
}

#[tokio::test]
async fn a_wrong_api_key_exits_4_and_the_key_is_never_printed() {
    let server = happy_server().await;
    let run = Sandbox::new()
        .env("SVC_BASE_URL", &svc_fixtures::base_url(&server))
        .run(&[
            "--api-key",
            "svc_live_wrong_secret_value",
            "calls",
            "show",
            bodies::ROLEPLAY_CALL_ID,
        ])
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("INVALID_API_KEY"), "{run:?}");
    assert!(!run.stderr.contains("wrong_secret") && !run.stdout.contains("wrong_secret"));
}

#[tokio::test]
async fn a_service_that_stays_unavailable_exits_75() {
    let server = happy_server().await;
    faults::error(&server, "SERVICE_UNAVAILABLE")
        .route("GET", "/calls/svc_call_fx0001")
        .times(10)
        .mount()
        .await;
    let run = Sandbox::for_server(&server)
        .run(&[
            "--retries",
            "1",
            "--retry-base-ms",
            "1",
            "calls",
            "show",
            bodies::ROLEPLAY_CALL_ID,
        ])
        .await;
    assert_eq!(run.code, 75, "{run:?}");
    assert_eq!(
        requests_to(&server, "GET", "/v1/calls/svc_call_fx0001")
            .await
            .len(),
        2
    );
}

#[tokio::test]
async fn an_unreachable_service_exits_75() {
    // Port 9 (discard) on loopback: nothing listens there in the test environment.
    let run = Sandbox::new()
        .env("SVC_BASE_URL", "http://127.0.0.1:9/v1")
        .env("SVC_API_KEY", "svc_live_x")
        .run(&["--retries", "0", "calls", "show", "svc_call_1"])
        .await;
    assert_eq!(run.code, 75, "{run:?}");
}

#[tokio::test]
async fn missing_or_invalid_configuration_is_a_usage_error() {
    for (env, names) in [
        (vec![("SVC_API_KEY", "svc_live_x")], "base URL"),
        (
            vec![
                ("SVC_API_KEY", "svc_live_x"),
                ("SVC_BASE_URL", "http://127.0.0.1:9"),
            ],
            "/v1",
        ),
        (vec![("SVC_BASE_URL", "http://127.0.0.1:9/v1")], "API key"),
    ] {
        let sandbox = env
            .iter()
            .fold(Sandbox::new(), |sandbox, (k, v)| sandbox.env(k, v));
        let run = sandbox.run(&["calls", "show", "svc_call_1"]).await;
        assert_eq!(run.code, 2, "{env:?}: {run:?}");
        assert!(run.stderr.contains(names), "{env:?}: {run:?}");
    }
}

#[tokio::test]
async fn help_lists_the_exit_codes_and_completions_are_generated() {
    let sandbox = Sandbox::new();
    let help = sandbox.run(&["--help"]).await;
    assert_eq!(help.code, 0);
    assert!(
        help.stdout.contains("Exit codes:") && help.stdout.contains("75"),
        "{help:?}"
    );
    let bash = sandbox.run(&["completions", "bash"]).await;
    assert_eq!(bash.code, 0, "{bash:?}");
    assert!(
        bash.stdout.contains("svc-cli") && bash.stdout.contains("roster"),
        "{bash:?}"
    );
    let bad = sandbox.run(&["completions", "tcsh"]).await;
    assert_eq!(bad.code, 2);
}

/// The one-line help of `webhook` and `store` names every subcommand (issue "Every command in
/// the docs works as pasted": `store --help` said "statistics, export" with no `report`, and
/// `webhook --help` left out `sign`).
#[tokio::test]
async fn the_webhook_and_store_help_line_names_each_of_their_subcommands() {
    let sandbox = Sandbox::new();
    for group in ["webhook", "store"] {
        let help = sandbox.run(&[group, "--help"]).await;
        assert_eq!(help.code, 0, "{help:?}");
        let about = help.stdout.lines().next().unwrap_or_default();
        let subcommands: Vec<&str> = help
            .stdout
            .lines()
            .skip_while(|line| *line != "Commands:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| *name != "help")
            .collect();
        assert!(subcommands.len() >= 3, "{group}: {}", help.stdout);
        for name in subcommands {
            assert!(
                about.contains(name),
                "`svc-cli {group} --help` says {about:?}, without `{name}`"
            );
        }
    }
}

#[test]
fn completions_into_a_closed_pipe_end_quietly_instead_of_panicking() {
    // As `svc-cli completions bash | head -1` can: the reader is gone before the write. A reader
    // that went away is not an error: exit 0, nothing on stderr.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc-cli"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[tokio::test]
async fn an_empty_api_key_is_a_usage_error_and_nothing_is_sent() {
    let server = MockServer::start().await;
    let sandbox = Sandbox::new().env("SVC_BASE_URL", &svc_fixtures::base_url(&server));
    let run = sandbox
        .run(&[
            "--api-key",
            "",
            "agencies",
            "upsert",
            "--platform-agency-id",
            "a1",
            "--name",
            "A",
        ])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("API key from the flag is empty"),
        "{run:?}"
    );
    let run = Sandbox::new()
        .env("SVC_BASE_URL", &svc_fixtures::base_url(&server))
        .env("SVC_API_KEY", "  ")
        .run(&[
            "agencies",
            "upsert",
            "--platform-agency-id",
            "a1",
            "--name",
            "A",
        ])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    // A blank variable counts as unset, as for every SVC_ variable.
    assert!(run.stderr.contains("no API key configured"), "{run:?}");
    assert!(
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty(),
        "nothing was sent"
    );
}

#[tokio::test]
async fn the_api_key_never_appears_in_trace_logs() {
    let server = happy_server().await;
    let run = Sandbox::for_server(&server)
        .env("RUST_LOG", "trace")
        .run(&["calls", "show", bodies::ROLEPLAY_CALL_ID])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stderr.is_empty(), "trace logging is on");
    assert!(
        !run.stderr.contains(svc_fixtures::API_KEY),
        "the key leaked into logs"
    );
}

#[tokio::test]
async fn help_names_the_store_variable_once_and_local_commands_list_no_service_flags() {
    let sandbox = Sandbox::new();
    for command in [
        &["reconcile", "--help"][..],
        &["store", "stats", "--help"],
        &["store", "export", "--help"],
        &["store", "report", "--help"],
        &["inbox", "dead-letters", "--help"],
        &["webhook", "serve", "--help"],
    ] {
        let run = sandbox.run(command).await;
        assert_eq!(run.code, 0, "{command:?}: {run:?}");
        assert_eq!(
            run.stdout.matches("SVC_STORE").count(),
            1,
            "{command:?}: {}",
            run.stdout
        );
    }
    for command in [
        &["store", "stats"][..],
        &["store", "export"],
        &["store", "report"],
        &["store"],
        &["inbox"],
        &["inbox", "dead-letters"],
        &["inbox", "requeue"],
        &["inbox", "discard"],
        &["webhook", "verify"],
        &["webhook", "sign"],
        &["sandbox"],
        &["sandbox", "enable-real-calls"],
        &["sandbox", "disable-real-calls"],
        &["sandbox", "ingest-real"],
        &["sandbox", "redisposition"],
        &["sandbox", "deliveries"],
    ] {
        let run = sandbox.run(&[command, &["--help"]].concat()).await;
        for flag in [
            "--base-url",
            "--api-key",
            "--retries",
            "--timeout",
            "--profile",
            "--insecure-http",
        ] {
            assert!(
                !run.stdout.contains(flag),
                "{command:?} does not use {flag}: {}",
                run.stdout
            );
        }
        assert!(run.stdout.contains("--json"), "{}", run.stdout);
    }
    // Still accepted, as every global flag is, and still listed where they matter.
    let run = sandbox
        .run(&["--retries", "1", "store", "stats", "--store", "none.db"])
        .await;
    assert!(run.stderr.contains("no store at none.db"), "{run:?}");
    for command in [&["calls", "list"][..], &["webhook", "serve"], &["webhook"]] {
        let run = sandbox.run(&[command, &["--help"]].concat()).await;
        assert!(
            run.stdout.contains("--base-url") && run.stdout.contains("--retries"),
            "{command:?}: {}",
            run.stdout
        );
    }
}

/// Issue 44: a mint answered `INTERNAL_ERROR` (the sandbox's `api-500`) is sent once, and the
/// error says it was not retried and why.
#[tokio::test]
async fn session_mint_on_internal_error_says_it_was_not_retried() {
    let server = MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/session"))
        .respond_with(respond::error("INTERNAL_ERROR"))
        .mount(&server)
        .await;
    let run = Sandbox::for_server(&server)
        .run(&["session", "mint", "--agent-id", "svc_agent_fx0001"])
        .await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(
        run.stderr
            .contains("session mint is not retried: a mint is not idempotent")
            && run.stderr.contains("INTERNAL_ERROR"),
        "{run:?}"
    );
    assert_eq!(requests_to(&server, "POST", "/v1/session").await.len(), 1);
}
