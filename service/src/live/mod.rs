//! The live practice call over WebSocket.
//!
//! Layout:
//! - [`protocol`]: the JSON frames exchanged on the socket.
//! - [`limits`]: what one call may send (turns, transcript size, frame rate), and what
//!   happens past a limit.
//! - [`session`]: one call in memory: the scripted persona and the growing transcript.
//! - [`socket`]: the `GET /v1/live/{sessionId}` WebSocket: ticket, conversation, ending.
//! - [`ceiling`]: ends redeemed calls nobody connected to at the ceiling.

pub mod ceiling;
pub mod limits;
pub mod protocol;
pub mod session;
pub mod socket;
