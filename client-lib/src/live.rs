//! The client side of the compact service's live text transport (what the browser SDK does after
//! redeeming a token): open the WebSocket at `connectionUrl`, authenticate with the single-use
//! ticket, wait for `ready` and the persona's greeting, `say` each line and wait for the reply,
//! `end`, and read the `ended` frame. Errors carry contract codes: an `error` frame's own code;
//! a connection that cannot open, drops or stays silent is `SERVICE_UNAVAILABLE` (transient);
//! a frame that breaks the protocol is `INTERNAL_ERROR`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::{CallId, ErrorClass, LiveSession, Persona};

/// A failure of the live call, with a contract code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct LiveError {
    /// Contract code (`INVALID_TOKEN`, `SERVICE_UNAVAILABLE`, …).
    pub code: String,
    /// What happened.
    pub message: String,
}

impl LiveError {
    fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// Auth for token and ticket codes, temporary for `SERVICE_UNAVAILABLE`/`INTERNAL_ERROR`.
    pub fn class(&self) -> ErrorClass {
        match self.code.as_str() {
            "INVALID_TOKEN" | "TOKEN_EXPIRED" | "TOKEN_ALREADY_USED" => ErrorClass::Auth,
            "SERVICE_UNAVAILABLE" | "INTERNAL_ERROR" => ErrorClass::Temporary,
            _ => ErrorClass::Failure,
        }
    }
}

/// What a finished practice call reports (the shape `practice` prints).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// Public call id from the `ended` frame.
    pub call_id: CallId,
    /// Duration from the `ended` frame.
    pub duration_sec: i64,
    /// The persona from `ready`.
    pub persona: Persona,
    /// The persona's lines (greeting first), for a human reader.
    #[serde(skip)]
    pub persona_lines: Vec<String>,
}

/// The largest frame the service may send (a persona line is well under a kilobyte); a bigger
/// one ends the call instead of filling memory.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// How a call runs.
#[derive(Debug, Clone, Copy)]
pub struct LiveOptions {
    /// Bounds opening the connection and every wait for a server frame.
    pub reply_timeout: Duration,
    /// Allow a plain `ws://` connection to a host other than this machine (the single-use
    /// ticket and the transcript would travel in clear).
    pub allow_insecure: bool,
}

/// Runs one call over the live transport. Blank script lines are skipped (an empty `say` is an
/// error for the service). `reply_timeout` bounds opening the connection and every wait for a
/// server frame. A plain `ws://` connection is opened only to this machine (see
/// [`run_call_with`]).
///
/// # Errors
/// A [`LiveError`] with the contract code of what went wrong.
pub async fn run_call(
    session: &LiveSession,
    script: &[String],
    reply_timeout: Duration,
) -> Result<Finished, LiveError> {
    let options = LiveOptions {
        reply_timeout,
        allow_insecure: false,
    };
    run_call_with(session, script, &options).await
}

/// [`run_call`] with every option: a `connectionUrl` that is plain `ws://` to a host other
/// than loopback is refused (`INSECURE_TRANSPORT`, nothing sent) unless
/// `options.allow_insecure`.
///
/// # Errors
/// A [`LiveError`] with the contract code of what went wrong.
pub async fn run_call_with(
    session: &LiveSession,
    script: &[String],
    options: &LiveOptions,
) -> Result<Finished, LiveError> {
    check_transport(&session.connection_url, options.allow_insecure)?;
    let reply_timeout = options.reply_timeout;
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES));
    let connect = tokio_tungstenite::connect_async_with_config(
        session.connection_url.as_str(),
        Some(config),
        false,
    );
    let (mut socket, _) = tokio::time::timeout(reply_timeout, connect)
        .await
        .map_err(|_| {
            LiveError::new(
                "SERVICE_UNAVAILABLE",
                format!("the live connection did not open within {reply_timeout:?}"),
            )
        })?
        .map_err(|e| {
            LiveError::new(
                "SERVICE_UNAVAILABLE",
                format!("cannot open the live connection: {e}"),
            )
        })?;
    let mut conn = Conn {
        socket: &mut socket,
        timeout: reply_timeout,
    };
    conn.send(json!({ "type": "auth", "ticket": session.connection_ticket }))
        .await?;

    let ready = conn.expect("ready").await?;
    let persona_name = ready
        .pointer("/persona/name")
        .and_then(Value::as_str)
        .unwrap_or(&session.persona.name)
        .to_owned();
    let mut finished = Finished {
        call_id: ready
            .get("callId")
            .and_then(Value::as_str)
            .map_or_else(|| session.call_id.clone(), CallId::from_service),
        duration_sec: 0,
        persona: Persona { name: persona_name },
        persona_lines: Vec::new(),
    };
    let greeting = conn.expect("persona").await?;
    finished.persona_lines.push(text_of(&greeting));

    for line in script.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        conn.send(json!({ "type": "say", "text": line })).await?;
        let reply = conn.next_frame().await?;
        match frame_type(&reply) {
            "persona" => finished.persona_lines.push(text_of(&reply)),
            // The call hit its ceiling while we were talking: report what the server said.
            "ended" => return Ok(with_end(finished, &reply)),
            other => return Err(unexpected(other, "persona")),
        }
    }
    conn.send(json!({ "type": "end" })).await?;
    let ended = conn.expect("ended").await?;
    let _ = socket.close(None).await;
    Ok(with_end(finished, &ended))
}

/// Refuses a `ws://` URL to a host other than this machine unless `allow_insecure`.
fn check_transport(url: &str, allow_insecure: bool) -> Result<(), LiveError> {
    let parsed = reqwest::Url::parse(url).map_err(|_| {
        LiveError::new(
            "INTERNAL_ERROR",
            format!("the service's connectionUrl {url:?} is not a URL"),
        )
    })?;
    match parsed.scheme() {
        "wss" => Ok(()),
        "ws" if allow_insecure || crate::is_loopback(&parsed) => Ok(()),
        "ws" => Err(LiveError::new(
            "INSECURE_TRANSPORT",
            format!(
                "the service offered a plain ws:// connection to {}: the ticket and the \
                 transcript would travel in clear; allow it explicitly (LiveOptions::allow_insecure)",
                parsed.host_str().unwrap_or("?")
            ),
        )),
        other => Err(LiveError::new(
            "INTERNAL_ERROR",
            format!("the service's connectionUrl has the scheme {other:?}, not ws or wss"),
        )),
    }
}

fn with_end(mut finished: Finished, ended: &Value) -> Finished {
    if let Some(id) = ended.get("callId").and_then(Value::as_str) {
        finished.call_id = CallId::from_service(id);
    }
    finished.duration_sec = ended
        .get("durationSec")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    finished
}

fn frame_type(frame: &Value) -> &str {
    frame.get("type").and_then(Value::as_str).unwrap_or("")
}

fn text_of(frame: &Value) -> String {
    frame
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn unexpected(got: &str, wanted: &str) -> LiveError {
    LiveError::new(
        "INTERNAL_ERROR",
        format!("expected a {wanted:?} frame, got {got:?}"),
    )
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The open connection and the wait bound.
struct Conn<'a> {
    socket: &'a mut Socket,
    timeout: Duration,
}

impl Conn<'_> {
    async fn send(&mut self, frame: Value) -> Result<(), LiveError> {
        self.socket
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|e| {
                LiveError::new(
                    "SERVICE_UNAVAILABLE",
                    format!("the live connection dropped: {e}"),
                )
            })
    }

    /// The next JSON frame; an `error` frame becomes its [`LiveError`].
    async fn next_frame(&mut self) -> Result<Value, LiveError> {
        loop {
            let next = tokio::time::timeout(self.timeout, self.socket.next())
                .await
                .map_err(|_| {
                    LiveError::new(
                        "SERVICE_UNAVAILABLE",
                        format!("no frame from the service within {:?}", self.timeout),
                    )
                })?;
            let message = match next {
                None | Some(Ok(Message::Close(_))) => {
                    return Err(LiveError::new(
                        "SERVICE_UNAVAILABLE",
                        "the service closed the live connection",
                    ));
                }
                Some(Err(e)) => {
                    return Err(LiveError::new(
                        "SERVICE_UNAVAILABLE",
                        format!("the live connection dropped: {e}"),
                    ));
                }
                Some(Ok(message)) => message,
            };
            let Message::Text(text) = message else {
                continue;
            };
            let frame: Value = serde_json::from_str(text.as_str()).map_err(|_| {
                LiveError::new(
                    "INTERNAL_ERROR",
                    "the service sent a frame that is not JSON",
                )
            })?;
            if frame_type(&frame) == "error" {
                let field = |k: &str| {
                    frame
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let code = Some(field("code"))
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| "INTERNAL_ERROR".into());
                return Err(LiveError {
                    code,
                    message: field("message"),
                });
            }
            return Ok(frame);
        }
    }

    async fn expect(&mut self, wanted: &str) -> Result<Value, LiveError> {
        let frame = self.next_frame().await?;
        match frame_type(&frame) {
            t if t == wanted => Ok(frame),
            other => Err(unexpected(other, wanted)),
        }
    }
}
