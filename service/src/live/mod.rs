//! The live practice call over WebSocket.
//!
//! Layout:
//! - [`protocol`]: the JSON frames exchanged on the socket.

pub mod protocol;
