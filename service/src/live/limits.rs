//! What one live practice call may send, so that one client cannot exhaust the service for
//! everyone (a transcript used to grow without bound: 204 MB in a second, then a call that
//! could not be stored). Past a limit the call is ended, as if the rep hung up: the transcript
//! so far is stored and scored, the client gets an `error` frame saying which limit, the
//! `ended` frame, and a WebSocket close with code 1008 (policy violation) and the same reason.
//!
//! | limit | default | past it |
//! |---|---|---|
//! | frame size | 64 KiB | the connection is closed by the WebSocket layer; the call ends |
//! | one utterance | 4 000 characters | the rest is cut (not refused) |
//! | rep turns | 500 | the call ends (`turn limit`) |
//! | transcript | 512 KiB of utterances | the call ends (`transcript size limit`) |
//! | frame rate | 10 a second, bursts of 20 | the frame is refused with an `error`; after 100 refused frames the call ends (`frame rate limit`) |

use std::time::{Duration, Instant};

/// The limits of one live call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveLimits {
    /// Rep turns (`say` frames kept) per call.
    pub max_rep_turns: usize,
    /// Bytes of utterances (rep and persona) per call.
    pub max_transcript_bytes: usize,
    /// Frames a second, sustained.
    pub frames_per_second: u32,
    /// Frames sent at once above the rate.
    pub frame_burst: u32,
    /// Refused frames (over the rate) before the call is ended.
    pub max_refused_frames: u32,
}

impl Default for LiveLimits {
    fn default() -> Self {
        Self {
            max_rep_turns: 500,
            max_transcript_bytes: 512 * 1024,
            frames_per_second: 10,
            frame_burst: 20,
            max_refused_frames: 100,
        }
    }
}

/// Why a call was ended by a limit: the `error` frame's message and the close reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitReached {
    /// Too many rep turns.
    Turns,
    /// Too many bytes of transcript.
    TranscriptSize,
    /// Too many frames over the rate.
    FrameRate,
}

impl LimitReached {
    /// The close reason (also the start of the `error` frame's message).
    pub fn reason(self) -> &'static str {
        match self {
            Self::Turns => "turn limit reached",
            Self::TranscriptSize => "transcript size limit reached",
            Self::FrameRate => "frame rate limit exceeded",
        }
    }
}

/// A token bucket of frames.
#[derive(Debug, Clone)]
pub struct FrameRate {
    tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
    refused: u32,
    max_refused: u32,
}

/// What the rate says of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Handle it.
    Yes,
    /// Refuse it with an `error` frame.
    Refuse,
    /// Refused too often: end the call.
    End,
}

impl FrameRate {
    /// A full bucket under `limits`.
    pub fn new(limits: &LiveLimits) -> Self {
        let burst = f64::from(limits.frame_burst.max(1));
        Self {
            tokens: burst,
            at: Instant::now(),
            rate: f64::from(limits.frames_per_second.max(1)),
            burst,
            refused: 0,
            max_refused: limits.max_refused_frames,
        }
    }

    /// Takes one frame at `now`.
    pub fn admit(&mut self, now: Instant) -> Admit {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Admit::Yes;
        }
        self.refused += 1;
        if self.refused >= self.max_refused {
            Admit::End
        } else {
            Admit::Refuse
        }
    }

    /// How long until the next frame would be admitted.
    pub fn wait(&self) -> Duration {
        Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_frames_are_refused_then_the_call_ends() {
        let limits = LiveLimits {
            frames_per_second: 2,
            frame_burst: 3,
            max_refused_frames: 2,
            ..LiveLimits::default()
        };
        let mut rate = FrameRate::new(&limits);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(rate.admit(now), Admit::Yes);
        }
        assert_eq!(rate.admit(now), Admit::Refuse);
        assert!(rate.wait() > Duration::ZERO);
        assert_eq!(
            rate.admit(now + Duration::from_millis(500)),
            Admit::Yes,
            "refilled"
        );
        assert_eq!(rate.admit(now + Duration::from_millis(500)), Admit::End);
    }
}
