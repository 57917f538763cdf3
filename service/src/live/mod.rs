//! The live practice call over WebSocket.
//!
//! Layout:
//! - [`protocol`]: the JSON frames exchanged on the socket.
//! - [`session`]: one call in memory: the scripted persona and the growing transcript.

pub mod protocol;
pub mod session;
