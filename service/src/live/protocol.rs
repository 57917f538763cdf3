//! The live transport's frames (BRIEF "Shared interfaces" 3): JSON text frames with a `type`.
//!
//! Client → server: `auth { ticket }` (first frame, within 10 s), `say { text }`, `end`.
//! Server → client: `ready { callId, persona { name } }`, `persona { text }`,
//! `ended { callId, durationSec }`, `error { code, message }`.

use serde::{Deserialize, Serialize};

/// A frame the client sends.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientFrame {
    /// The first frame: the single-use connection ticket.
    Auth {
        /// The `connectionTicket` from POST /roleplay/session.
        ticket: String,
    },
    /// One rep utterance.
    Say {
        /// What the rep said.
        text: String,
    },
    /// The rep hangs up.
    End,
}

impl ClientFrame {
    /// Parses a text frame; `None` for anything malformed (answered with `INVALID_REQUEST`).
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

/// The persona as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersonaInfo {
    /// The persona's name.
    pub name: String,
}

/// A frame the server sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// The ticket was accepted; the call is live.
    Ready {
        /// The public call id.
        #[serde(rename = "callId")]
        call_id: String,
        /// Who the rep is talking to.
        persona: PersonaInfo,
    },
    /// One persona line.
    Persona {
        /// What the persona said.
        text: String,
    },
    /// The call ended.
    Ended {
        /// The public call id.
        #[serde(rename = "callId")]
        call_id: String,
        /// Whole seconds from start to end.
        #[serde(rename = "durationSec")]
        duration_sec: i64,
    },
    /// Something went wrong; `code` is a contract error code.
    Error {
        /// Contract code (`INVALID_TOKEN`, `INVALID_REQUEST`, …).
        code: &'static str,
        /// Human-readable message.
        message: String,
    },
}

impl ServerFrame {
    /// The frame as JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"type":"error","code":"INTERNAL_ERROR","message":"frame encoding failed"}"#
                .to_string()
        })
    }

    /// An `error` frame.
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        ServerFrame::Error {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_frames_parse_and_bad_ones_do_not() {
        assert_eq!(
            ClientFrame::parse(r#"{"type":"auth","ticket":"t"}"#),
            Some(ClientFrame::Auth { ticket: "t".into() })
        );
        assert_eq!(
            ClientFrame::parse(r#"{"type":"say","text":"hi"}"#),
            Some(ClientFrame::Say { text: "hi".into() })
        );
        assert_eq!(
            ClientFrame::parse(r#"{"type":"end"}"#),
            Some(ClientFrame::End)
        );
        assert_eq!(ClientFrame::parse(r#"{"type":"say"}"#), None);
        assert_eq!(ClientFrame::parse(r#"{"type":"shout","text":"x"}"#), None);
        assert_eq!(ClientFrame::parse("not json"), None);
    }

    #[test]
    fn server_frames_have_the_documented_shape() {
        let ready = ServerFrame::Ready {
            call_id: "svc_call_1".into(),
            persona: PersonaInfo { name: "Ann".into() },
        };
        assert_eq!(
            ready.to_text(),
            r#"{"type":"ready","callId":"svc_call_1","persona":{"name":"Ann"}}"#
        );
        let ended = ServerFrame::Ended {
            call_id: "svc_call_1".into(),
            duration_sec: 7,
        };
        assert_eq!(
            ended.to_text(),
            r#"{"type":"ended","callId":"svc_call_1","durationSec":7}"#
        );
        assert_eq!(
            ServerFrame::error("INVALID_TOKEN", "bad").to_text(),
            r#"{"type":"error","code":"INVALID_TOKEN","message":"bad"}"#
        );
    }
}
