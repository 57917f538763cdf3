//! What the demo's reps say in their practice calls: a strong rep who does every stage of the
//! enrollment call, a weak one who skips most of them, and one who never speaks (a call the
//! service cannot score, so the failure webhook occurs too).

/// The rep does every stage: introduction, recording notice, disclaimer, needs, recommendation,
/// objection, close.
const STRONG: &[&str] = &[
    "Hi, this is {name}, a licensed insurance agent calling about your Medicare options.",
    "Before we start, this call is being recorded for quality and compliance.",
    "We do not offer every plan available in your area; please contact Medicare.gov or 1-800-MEDICARE for all options.",
    "Which doctors do you see, and what prescriptions do you take?",
    "Based on that, this plan keeps your doctors, covers your prescriptions and has a zero premium.",
    "I understand the concern about cost; your drugs are covered with low copays.",
    "Would you like to enroll today? I can complete the application now.",
];

/// The rep pitches at once and pushes for the sale.
const WEAK: &[&str] = &[
    "Hey there, got a great plan for you.",
    "It's really cheap, you should sign up.",
    "So do you want it or not?",
];

/// How a demo rep talks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rep {
    /// Every stage of the call.
    Strong,
    /// Few stages: a low score.
    Weak,
    /// Connects and ends without a word: not scored.
    Silent,
}

impl Rep {
    /// The rep of the demo's call number `n`: mostly strong, some weak, a few silent.
    pub fn for_call(n: usize) -> Self {
        match n % 6 {
            0 | 2 | 4 => Rep::Strong,
            1 | 3 => Rep::Weak,
            _ => Rep::Silent,
        }
    }

    /// The lines the rep says, with the rep's `name`.
    pub fn lines(self, name: &str) -> Vec<String> {
        let lines: &[&str] = match self {
            Rep::Strong => STRONG,
            Rep::Weak => WEAK,
            Rep::Silent => &[],
        };
        lines.iter().map(|l| l.replace("{name}", name)).collect()
    }
}
