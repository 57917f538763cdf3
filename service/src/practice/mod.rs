//! Practice calls without I/O: the drill and persona catalog, the scripted persona that plays the
//! customer on a live call, and the deterministic rubric that scores the finished transcript.
//!
//! Layout:
//! - [`catalog`]: drill keys, difficulty, the persona pool and how filters pick a persona.
//! - [`transcript`]: the turns of a call (who spoke, what was said), as stored and returned.
//! - [`stages`]: recognises which stages of an enrollment call a rep utterance covers.
//! - [`persona`]: the scripted customer that answers each rep utterance.
//! - [`rubric`]: turns a finished transcript into a score, or says why it cannot be scored.
//! - [`state`]: the shared practice state held by the server (token key, workers, settings).

pub mod catalog;
pub mod persona;
pub mod rubric;
pub mod stages;
pub mod state;
pub mod transcript;
