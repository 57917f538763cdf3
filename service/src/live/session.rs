//! One live practice call in memory: the scripted persona and the transcript as it grows. The
//! socket handler feeds it frames; the transcript is stored when the call ends.

use super::limits::{LimitReached, LiveLimits};
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
    limits: LiveLimits,
    rep_turns: usize,
    bytes: usize,
}

/// What a rep utterance did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// Recorded; the persona's reply.
    Reply(String),
    /// Blank: nothing recorded.
    Blank,
    /// A limit of the call is reached: nothing more is recorded, the call must end.
    Limit(LimitReached),
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
                bytes: greeting.len(),
                transcript: vec![Turn::customer(greeting.clone())],
                limits: LiveLimits::default(),
                rep_turns: 0,
            },
            greeting,
        )
    }

    /// The same session under other limits.
    pub fn with_limits(mut self, limits: LiveLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The persona's name.
    pub fn persona_name(&self) -> &'static str {
        self.script.persona().name
    }

    /// Records a rep utterance (cut at [`MAX_UTTERANCE_CHARS`]) and returns the persona's
    /// reply, unless it is blank or a limit of the call is reached.
    pub fn say(&mut self, text: &str) -> Said {
        let text = text.trim();
        if text.is_empty() {
            return Said::Blank;
        }
        if self.rep_turns >= self.limits.max_rep_turns {
            return Said::Limit(LimitReached::Turns);
        }
        let text: String = text.chars().take(MAX_UTTERANCE_CHARS).collect();
        let reply = self.script.reply(&text);
        let bytes = self.bytes + text.len() + reply.len();
        if bytes > self.limits.max_transcript_bytes {
            return Said::Limit(LimitReached::TranscriptSize);
        }
        self.bytes = bytes;
        self.rep_turns += 1;
        self.transcript.push(Turn::agent(text));
        self.transcript.push(Turn::customer(reply.clone()));
        Said::Reply(reply)
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
        assert_eq!(s.say("   "), Said::Blank);
        let Said::Reply(reply) = s.say("  Hi, my name is Sam ") else {
            panic!("a reply");
        };
        assert_eq!(s.transcript().len(), 3);
        assert_eq!(s.transcript()[1], Turn::agent("Hi, my name is Sam"));
        assert_eq!(s.transcript()[2], Turn::customer(reply));
        assert!(s.transcript_json().starts_with(r#"[{"role":"customer""#));
    }

    #[test]
    fn past_its_turn_or_size_limit_a_session_records_nothing_more() {
        let (session, _) = CallSession::start("ma-full-sale", "Frank Russo").expect("persona");
        let mut s = session.with_limits(LiveLimits {
            max_rep_turns: 2,
            ..LiveLimits::default()
        });
        assert!(matches!(s.say("one"), Said::Reply(_)));
        assert!(matches!(s.say("two"), Said::Reply(_)));
        assert_eq!(s.say("three"), Said::Limit(LimitReached::Turns));
        assert_eq!(s.transcript().len(), 5, "greeting and two exchanges");

        let (session, greeting) =
            CallSession::start("ma-full-sale", "Frank Russo").expect("persona");
        let mut s = session.with_limits(LiveLimits {
            max_transcript_bytes: greeting.len() + 200,
            ..LiveLimits::default()
        });
        let long = "x".repeat(150);
        assert!(matches!(s.say("hi"), Said::Reply(_)) || s.transcript().len() == 1);
        assert_eq!(s.say(&long), Said::Limit(LimitReached::TranscriptSize));
    }

    #[test]
    fn a_stored_choice_that_does_not_resolve_is_none() {
        assert!(CallSession::start("nope", "Frank Russo").is_none());
        assert!(CallSession::start("ma-full-sale", "Nobody").is_none());
        assert!(CallSession::start("fe-closing", "Frank Russo").is_none());
    }
}
