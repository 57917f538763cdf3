//! One live practice call in memory: the scripted persona and the transcript as it grows. The
//! socket handler feeds it frames; the transcript is stored when the call ends.

use crate::practice::catalog::{Drill, Persona};
use crate::practice::persona::ScriptedPersona;
use crate::practice::transcript::Turn;

/// The longest utterance kept, in characters (longer ones are cut, not refused).
pub const MAX_UTTERANCE_CHARS: usize = 4_000;

/// A call in progress.
#[derive(Debug, Clone)]
pub struct CallSession {
    script: ScriptedPersona,
    transcript: Vec<Turn>,
}

impl CallSession {
    /// Finds the persona chosen at redeem (stored drill key and persona name) and lets it
    /// answer the phone. `None` if the stored choice no longer resolves.
    pub fn start(drill_key: &str, persona_name: &str) -> Option<(Self, String)> {
        let persona = Drill::find(drill_key)?.persona_named(persona_name)?;
        Some(Self::with_persona(persona))
    }

    /// A session for a persona already chosen.
    pub fn with_persona(persona: &'static Persona) -> (Self, String) {
        let script = ScriptedPersona::new(persona);
        let greeting = script.greeting();
        (
            Self {
                script,
                transcript: vec![Turn::customer(greeting.clone())],
            },
            greeting,
        )
    }

    /// The persona's name.
    pub fn persona_name(&self) -> &'static str {
        self.script.persona().name
    }

    /// Records a rep utterance and returns the persona's reply; `None` for a blank utterance.
    pub fn say(&mut self, text: &str) -> Option<String> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let text: String = text.chars().take(MAX_UTTERANCE_CHARS).collect();
        let reply = self.script.reply(&text);
        self.transcript.push(Turn::agent(text));
        self.transcript.push(Turn::customer(reply.clone()));
        Some(reply)
    }

    /// The transcript so far.
    pub fn transcript(&self) -> &[Turn] {
        &self.transcript
    }

    /// The transcript as stored JSON.
    pub fn transcript_json(&self) -> String {
        serde_json::to_string(&self.transcript).unwrap_or_else(|_| "[]".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_records_both_sides_and_refuses_blank_lines() {
        let (mut s, greeting) = CallSession::start("ma-full-sale", "Frank Russo").expect("persona");
        assert_eq!(s.persona_name(), "Frank Russo");
        assert_eq!(s.transcript(), [Turn::customer(greeting)]);
        assert!(s.say("   ").is_none());
        let reply = s.say("  Hi, my name is Sam ").expect("reply");
        assert_eq!(s.transcript().len(), 3);
        assert_eq!(s.transcript()[1], Turn::agent("Hi, my name is Sam"));
        assert_eq!(s.transcript()[2], Turn::customer(reply));
        assert!(s.transcript_json().starts_with(r#"[{"role":"customer""#));
    }

    #[test]
    fn a_stored_choice_that_does_not_resolve_is_none() {
        assert!(CallSession::start("nope", "Frank Russo").is_none());
        assert!(CallSession::start("ma-full-sale", "Nobody").is_none());
        assert!(CallSession::start("fe-closing", "Frank Russo").is_none());
    }
}
