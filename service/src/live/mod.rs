//! The live practice call over WebSocket.
//!
//! Layout:
//! - [`protocol`]: the JSON frames exchanged on the socket.
//! - [`session`]: one call in memory: the scripted persona and the growing transcript.
//! - [`socket`]: the `GET /v1/live/{sessionId}` WebSocket: ticket, conversation, ending.
//! - [`ceiling`]: ends redeemed calls nobody connected to at the ceiling.

pub mod ceiling;
pub mod protocol;
pub mod session;
pub mod socket;
