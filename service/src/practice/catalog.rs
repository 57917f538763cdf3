//! The drill and persona catalog: which drill keys exist, which personas can play them, and how
//! `difficulty` and `filters.state` pick one persona for a call.
//!
//! Decision (the contract names `fe-closing` and `hi-crosssell` "for later use" and keeps
//! `DRILL_NOT_FOUND` for unknown keys): both keys are *known* drills with an empty persona pool in
//! v1, so redeeming them answers `503 SERVICE_UNAVAILABLE` ("no persona available for the drill",
//! the token spent, as for every post-redemption failure). Any other key is `400 DRILL_NOT_FOUND`.
//! Keys are matched exactly (after the trimming every string field gets).

use std::fmt;

/// How hard the persona is to sell to. The contract's `difficulty` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Difficulty {
    /// Friendly, one objection.
    Beginner,
    /// Guarded, two objections. The default.
    #[default]
    Advanced,
    /// Sceptical, three objections and a push back on the close.
    Elite,
}

impl Difficulty {
    /// Parses the contract spelling (`Beginner`, `Advanced`, `Elite`), exactly.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "Beginner" => Some(Self::Beginner),
            "Advanced" => Some(Self::Advanced),
            "Elite" => Some(Self::Elite),
            _ => None,
        }
    }

    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Beginner => "Beginner",
            Self::Advanced => "Advanced",
            Self::Elite => "Elite",
        }
    }
}

impl fmt::Display for Difficulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An AI customer. Only `name` leaves the service; the rest shapes the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persona {
    /// Full name, returned to the caller as `persona.name`.
    pub name: &'static str,
    /// Two-letter US state code the persona lives in.
    pub state: &'static str,
    /// Home town, used in replies.
    pub city: &'static str,
    /// How hard the persona is to sell to.
    pub difficulty: Difficulty,
    /// The doctor the persona does not want to lose.
    pub doctor: &'static str,
    /// What the persona takes, in words.
    pub prescriptions: &'static str,
}

impl Persona {
    /// The first name, for the greeting.
    pub fn first_name(&self) -> &'static str {
        self.name.split(' ').next().unwrap_or(self.name)
    }
}

/// A drill the catalog knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drill {
    /// `ma-full-sale`: a full enrollment call for a health-plan product. The v1 drill.
    MaFullSale,
    /// `fe-closing`: named for later use; no personas in v1.
    FeClosing,
    /// `hi-crosssell`: named for later use; no personas in v1.
    HiCrosssell,
}

impl Drill {
    /// Looks a drill key up; `None` is `DRILL_NOT_FOUND`.
    pub fn find(key: &str) -> Option<Self> {
        match key {
            "ma-full-sale" => Some(Self::MaFullSale),
            "fe-closing" => Some(Self::FeClosing),
            "hi-crosssell" => Some(Self::HiCrosssell),
            _ => None,
        }
    }

    /// The drill key as stored on calls.
    pub fn key(self) -> &'static str {
        match self {
            Self::MaFullSale => "ma-full-sale",
            Self::FeClosing => "fe-closing",
            Self::HiCrosssell => "hi-crosssell",
        }
    }

    /// The personas that can play this drill (empty for the drills named for later).
    pub fn personas(self) -> &'static [Persona] {
        match self {
            Self::MaFullSale => MA_PERSONAS,
            Self::FeClosing | Self::HiCrosssell => &[],
        }
    }

    /// The drill's persona with this name (how a live call finds the persona chosen at redeem).
    pub fn persona_named(self, name: &str) -> Option<&'static Persona> {
        self.personas().iter().find(|p| p.name == name)
    }

    /// Picks the persona for a call: the drill's personas of the requested difficulty, narrowed
    /// to `state` when given and when any persona lives there (otherwise the filter falls back to
    /// the whole difficulty pool). `seed` chooses among the candidates, so different calls meet
    /// different customers while the choice stays reproducible. `None` means no persona is
    /// available (`SERVICE_UNAVAILABLE`).
    pub fn pick_persona(
        self,
        difficulty: Difficulty,
        state: Option<&str>,
        seed: u64,
    ) -> Option<&'static Persona> {
        let by_difficulty: Vec<&'static Persona> = self
            .personas()
            .iter()
            .filter(|p| p.difficulty == difficulty)
            .collect();
        let in_state: Vec<&'static Persona> = match state {
            Some(code) => by_difficulty
                .iter()
                .copied()
                .filter(|p| p.state.eq_ignore_ascii_case(code.trim()))
                .collect(),
            None => Vec::new(),
        };
        let pool = if in_state.is_empty() {
            by_difficulty
        } else {
            in_state
        };
        if pool.is_empty() {
            return None;
        }
        let index = usize::try_from(seed % pool.len() as u64).unwrap_or(0);
        pool.get(index).copied()
    }
}

macro_rules! persona {
    ($name:literal, $state:literal, $city:literal, $difficulty:ident, $doctor:literal, $rx:literal) => {
        Persona {
            name: $name,
            state: $state,
            city: $city,
            difficulty: Difficulty::$difficulty,
            doctor: $doctor,
            prescriptions: $rx,
        }
    };
}

/// The persona pool of `ma-full-sale`: every difficulty in several states.
const MA_PERSONAS: &[Persona] = &[
    persona!(
        "Dorothy Miller",
        "FL",
        "Tampa",
        Beginner,
        "Dr. Patel",
        "metformin for my sugar"
    ),
    persona!(
        "Harold Jenkins",
        "TX",
        "San Antonio",
        Beginner,
        "Dr. Garza",
        "a blood pressure pill"
    ),
    persona!(
        "Linda Kowalski",
        "OH",
        "Toledo",
        Beginner,
        "Dr. Brennan",
        "atorvastatin"
    ),
    persona!(
        "Gloria Ramirez",
        "AZ",
        "Mesa",
        Beginner,
        "Dr. Lee",
        "an inhaler and vitamin D"
    ),
    persona!(
        "Frank Russo",
        "FL",
        "Orlando",
        Advanced,
        "Dr. Feldman",
        "Eliquis and a statin"
    ),
    persona!(
        "Betty Johnson",
        "GA",
        "Macon",
        Advanced,
        "Dr. Okafor",
        "insulin and lisinopril"
    ),
    persona!(
        "Walter Schmidt",
        "PA",
        "Allentown",
        Advanced,
        "Dr. Novak",
        "Xarelto"
    ),
    persona!(
        "Carol Nguyen",
        "CA",
        "Fresno",
        Advanced,
        "Dr. Tran",
        "levothyroxine"
    ),
    persona!(
        "Eugene Carter",
        "TX",
        "Houston",
        Elite,
        "Dr. Whitfield",
        "Entresto and metoprolol"
    ),
    persona!(
        "Margaret O'Brien",
        "NY",
        "Buffalo",
        Elite,
        "Dr. Goldberg",
        "Ozempic"
    ),
    persona!(
        "Raymond Brooks",
        "NC",
        "Raleigh",
        Elite,
        "Dr. Hayes",
        "Trelegy and prednisone"
    ),
    persona!(
        "Patricia Lewis",
        "MI",
        "Flint",
        Elite,
        "Dr. Sharma",
        "Jardiance and a water pill"
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difficulty_parses_the_three_contract_values_exactly() {
        assert_eq!(Difficulty::parse("Beginner"), Some(Difficulty::Beginner));
        assert_eq!(Difficulty::parse("Advanced"), Some(Difficulty::Advanced));
        assert_eq!(Difficulty::parse("Elite"), Some(Difficulty::Elite));
        assert_eq!(Difficulty::parse("elite"), None);
        assert_eq!(Difficulty::parse(""), None);
        assert_eq!(Difficulty::default(), Difficulty::Advanced);
    }

    #[test]
    fn only_the_three_named_drill_keys_are_known() {
        assert_eq!(Drill::find("ma-full-sale"), Some(Drill::MaFullSale));
        assert_eq!(Drill::find("fe-closing"), Some(Drill::FeClosing));
        assert_eq!(Drill::find("hi-crosssell"), Some(Drill::HiCrosssell));
        assert_eq!(Drill::find("MA-FULL-SALE"), None);
        assert_eq!(Drill::find("ma-full-sale-2"), None);
    }

    #[test]
    fn drills_named_for_later_have_no_persona() {
        for drill in [Drill::FeClosing, Drill::HiCrosssell] {
            assert!(drill.pick_persona(Difficulty::Advanced, None, 0).is_none());
        }
    }

    #[test]
    fn every_difficulty_has_several_personas_in_distinct_states() {
        for d in [
            Difficulty::Beginner,
            Difficulty::Advanced,
            Difficulty::Elite,
        ] {
            let states: std::collections::HashSet<_> = MA_PERSONAS
                .iter()
                .filter(|p| p.difficulty == d)
                .map(|p| p.state)
                .collect();
            assert!(states.len() >= 3, "{d} has too few states");
        }
    }

    #[test]
    fn state_filter_narrows_the_pool() {
        for seed in 0..10 {
            let p = Drill::MaFullSale.pick_persona(Difficulty::Advanced, Some("FL"), seed);
            assert_eq!(p.map(|p| p.name), Some("Frank Russo"));
        }
        let p = Drill::MaFullSale.pick_persona(Difficulty::Elite, Some(" ny "), 3);
        assert_eq!(p.map(|p| p.name), Some("Margaret O'Brien"));
    }

    #[test]
    fn state_without_a_persona_falls_back_to_the_difficulty_pool() {
        let names: std::collections::HashSet<_> = (0..20)
            .filter_map(|seed| {
                Drill::MaFullSale.pick_persona(Difficulty::Beginner, Some("WY"), seed)
            })
            .map(|p| p.name)
            .collect();
        assert_eq!(names.len(), 4);
        // A persona of another difficulty in that state does not override the difficulty.
        let p = Drill::MaFullSale.pick_persona(Difficulty::Beginner, Some("NY"), 0);
        assert_eq!(p.map(|p| p.difficulty), Some(Difficulty::Beginner));
    }

    #[test]
    fn personas_are_found_by_name_within_their_drill() {
        assert_eq!(
            Drill::MaFullSale
                .persona_named("Frank Russo")
                .map(|p| p.state),
            Some("FL")
        );
        assert!(Drill::MaFullSale.persona_named("Nobody").is_none());
        assert!(Drill::FeClosing.persona_named("Frank Russo").is_none());
    }

    #[test]
    fn the_same_seed_picks_the_same_persona() {
        let a = Drill::MaFullSale.pick_persona(Difficulty::Elite, None, 42);
        let b = Drill::MaFullSale.pick_persona(Difficulty::Elite, None, 42);
        assert_eq!(a, b);
    }
}
