//! `GET /v1/live/{sessionId}`: the WebSocket of a live practice call (protocol in
//! [`super::protocol`]). The first frame must be `auth` with the single-use ticket within
//! 10 seconds; then each `say` gets one `persona` reply. The call ends on `end`, on a dropped
//! connection, at the ceiling (counted from redeem), at server shutdown, or past one of the
//! call's limits ([`super::limits`]); the transcript is stored, the `ended` frame sent when the
//! socket is still open, and scoring woken.

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;

use super::limits::{Admit, FrameRate, LimitReached};
use super::protocol::{ClientFrame, PersonaInfo, ServerFrame};
use super::session::{CallSession, Said};
use crate::api::roleplay::ticket_hash;
use crate::db::LiveCall;
use crate::practice::state::AUTH_FRAME_TIMEOUT;
use crate::state::AppState;

/// Largest frame accepted from a client.
const MAX_FRAME_BYTES: usize = 64 * 1024;

/// Routes of the live transport (relative to `/v1`).
pub fn router() -> Router<AppState> {
    Router::new().route("/live/{session_id}", get(upgrade))
}

async fn upgrade(
    State(state): State<AppState>,
    Path(session_id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    ws.max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| serve(state, session_id, socket))
}

async fn send(socket: &mut WebSocket, frame: &ServerFrame) -> bool {
    socket
        .send(Message::Text(frame.to_text().into()))
        .await
        .is_ok()
}

async fn refuse(mut socket: WebSocket, code: &'static str, message: &str) {
    let _ = send(&mut socket, &ServerFrame::error(code, message)).await;
    let _ = socket.send(Message::Close(None)).await;
}

async fn authenticate(
    state: &AppState,
    session_id: &str,
    socket: &mut WebSocket,
) -> Result<LiveCall, &'static str> {
    let first = tokio::time::timeout(AUTH_FRAME_TIMEOUT, socket.recv()).await;
    let Ok(Some(Ok(Message::Text(text)))) = first else {
        return Err("the first frame must be auth with the connection ticket, within 10 seconds");
    };
    let Some(ClientFrame::Auth { ticket }) = ClientFrame::parse(&text) else {
        return Err("the first frame must be auth with the connection ticket");
    };
    match state
        .db
        .claim_ticket(session_id, &ticket_hash(&ticket), state.now_ms())
        .await
    {
        Ok(Some(call)) => Ok(call),
        Ok(None) => Err("the connection ticket is invalid, already used, or the call is over"),
        Err(error) => {
            tracing::error!(error = %error, "claiming a connection ticket failed");
            Err("the connection ticket could not be checked")
        }
    }
}

async fn serve(state: AppState, session_id: String, mut socket: WebSocket) {
    let call = match authenticate(&state, &session_id, &mut socket).await {
        Ok(call) => call,
        Err(message) => return refuse(socket, "INVALID_TOKEN", message).await,
    };
    let Some((session, greeting)) = CallSession::start(&call.drill_key, &call.persona_name) else {
        tracing::error!(
            call_id = call.call_id,
            "the stored persona no longer resolves"
        );
        end(&state, &call.call_id, "[]".to_string(), None, None).await;
        return refuse(socket, "INTERNAL_ERROR", "the persona could not be started").await;
    };
    let limits = state.practice.live_limits;
    let mut session = session.with_limits(limits);
    let mut rate = FrameRate::new(&limits);
    let mut limited: Option<LimitReached> = None;
    let ready = ServerFrame::Ready {
        call_id: call.call_id.clone(),
        persona: PersonaInfo {
            name: session.persona_name().to_string(),
        },
    };
    let mut open = send(&mut socket, &ready).await
        && send(&mut socket, &ServerFrame::Persona { text: greeting }).await;
    let elapsed_ms = state.now_ms().saturating_sub(call.started_at).max(0);
    let remaining = state
        .practice
        .call_ceiling
        .saturating_sub(Duration::from_millis(
            u64::try_from(elapsed_ms).unwrap_or(0),
        ));
    let ceiling = tokio::time::sleep(remaining);
    tokio::pin!(ceiling);
    let mut stopping = state.practice.stopping.clone();
    while open {
        let message = tokio::select! {
            message = socket.recv() => message,
            () = &mut ceiling => break,
            _ = stopping.wait_for(|stop| *stop) => break,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Binary(_))) => {
                open = send(
                    &mut socket,
                    &ServerFrame::error("INVALID_REQUEST", "frames must be JSON text"),
                )
                .await;
                continue;
            }
            Some(Ok(Message::Close(_)) | Err(_)) | None => {
                open = false;
                break;
            }
        };
        match rate.admit(std::time::Instant::now()) {
            Admit::Yes => {}
            Admit::Refuse => {
                let message = format!(
                    "too many frames: at most {} a second; wait {} ms",
                    limits.frames_per_second,
                    rate.wait().as_millis()
                );
                open = send(&mut socket, &ServerFrame::error("INVALID_REQUEST", message)).await;
                continue;
            }
            Admit::End => {
                limited = Some(LimitReached::FrameRate);
                break;
            }
        }
        match ClientFrame::parse(&text) {
            Some(ClientFrame::Say { text }) => match session.say(&text) {
                Said::Reply(reply) => {
                    open = send(&mut socket, &ServerFrame::Persona { text: reply }).await
                }
                Said::Blank => {
                    open = send(
                        &mut socket,
                        &ServerFrame::error("INVALID_REQUEST", "say needs non-empty text"),
                    )
                    .await
                }
                Said::Limit(reached) => {
                    limited = Some(reached);
                    break;
                }
            },
            Some(ClientFrame::End) => break,
            Some(ClientFrame::Auth { .. }) => {
                open = send(
                    &mut socket,
                    &ServerFrame::error("INVALID_REQUEST", "already authenticated"),
                )
                .await;
            }
            None => {
                open = send(
                    &mut socket,
                    &ServerFrame::error("INVALID_REQUEST", "malformed frame: expected say or end"),
                )
                .await;
            }
        }
    }
    if let Some(reached) = limited
        && open
    {
        let message = format!("{}; the call ended", reached.reason());
        open = send(&mut socket, &ServerFrame::error("INVALID_REQUEST", message)).await;
    }
    let socket = open.then_some(socket);
    end(
        &state,
        &call.call_id,
        session.transcript_json(),
        socket,
        limited,
    )
    .await;
}

/// Ends the call: stores its transcript (or, when that fails, ends it without one, so it is
/// never left live: it is then not scored, `SCORING_INCOMPLETE`, and counts toward the
/// allowance), wakes scoring, and tells the client.
async fn end(
    state: &AppState,
    call_id: &str,
    transcript_json: String,
    socket: Option<WebSocket>,
    limited: Option<LimitReached>,
) {
    let now = state.now_ms();
    let duration = match state.db.end_call(call_id, transcript_json, now).await {
        Ok(duration) => duration,
        Err(error) => {
            tracing::error!(call_id, error = %error,
                "storing a call's transcript failed; ending it without one");
            match state.db.end_call_without_transcript(call_id, now).await {
                Ok(duration) => duration,
                Err(error) => {
                    tracing::error!(call_id, error = %error, "ending a call failed");
                    None
                }
            }
        }
    };
    state.practice.scorer.notify();
    if let Some(mut socket) = socket {
        if let Some(duration_sec) = duration {
            let _ = send(
                &mut socket,
                &ServerFrame::Ended {
                    call_id: call_id.to_string(),
                    duration_sec,
                },
            )
            .await;
        }
        let close = limited.map(|reached| CloseFrame {
            code: close_code::POLICY,
            reason: reached.reason().into(),
        });
        let _ = socket.send(Message::Close(close)).await;
    }
}
