//! The scripted customer of a live practice call: deterministic replies shaped by the persona's
//! difficulty and home state, answering each stage of an enrollment call plausibly. It keeps a
//! queue of objections (one for Beginner, two for Advanced, three for Elite) that it raises when
//! the rep presents a plan or tries to close, and it never hangs up.

use super::catalog::{Difficulty, Persona};
use super::stages::{self, Stage};

/// The state of one persona during one call.
#[derive(Debug, Clone)]
pub struct ScriptedPersona {
    persona: &'static Persona,
    objections: Vec<String>,
    objection_open: bool,
    covered: Vec<Stage>,
    nudges: usize,
}

impl ScriptedPersona {
    /// A persona ready to answer the phone.
    pub fn new(persona: &'static Persona) -> Self {
        let all = [
            format!(
                "I'm worried about the cost. I'm on a fixed income here in {}.",
                persona.city
            ),
            format!(
                "I don't want to lose {}. Is {} in this network?",
                persona.doctor, persona.doctor
            ),
            "Honestly, I'm happy with what I have. I need to think about it and talk to my son."
                .to_string(),
        ];
        let count = match persona.difficulty {
            Difficulty::Beginner => 1,
            Difficulty::Advanced => 2,
            Difficulty::Elite => 3,
        };
        let mut objections: Vec<String> = all.into_iter().take(count).collect();
        objections.reverse(); // popped from the back, so the cost comes first
        Self {
            persona,
            objections,
            objection_open: false,
            covered: Vec::new(),
            nudges: 0,
        }
    }

    /// The persona this script plays.
    pub fn persona(&self) -> &'static Persona {
        self.persona
    }

    /// What the customer says on picking up the phone.
    pub fn greeting(&self) -> String {
        match self.persona.difficulty {
            Difficulty::Beginner => {
                format!("Hello, this is {} speaking!", self.persona.first_name())
            }
            Difficulty::Advanced => "Hello? Who's calling?".to_string(),
            Difficulty::Elite => {
                "Yeah? Who is this? If you're selling something I'm busy.".to_string()
            }
        }
    }

    /// The customer's reply to one rep utterance. Always a non-empty line.
    pub fn reply(&mut self, utterance: &str) -> String {
        let found = stages::stages_in(utterance);
        let answers_objection = self.objection_open && stages::addresses_objection(utterance);
        for stage in &found {
            if !self.covered.contains(stage) {
                self.covered.push(*stage);
            }
        }
        if answers_objection {
            self.objection_open = false;
            return self.after_objection_answered();
        }
        if found.contains(&Stage::Close) {
            return self.on_close();
        }
        if found.contains(&Stage::PlanPresentation) {
            return self.on_presentation();
        }
        let mut parts = Vec::new();
        if found.contains(&Stage::DoctorsDiscovery) {
            parts.push(format!(
                "I see {} in {}, I've been going to them for years.",
                self.persona.doctor, self.persona.city
            ));
        }
        if found.contains(&Stage::PrescriptionsDiscovery) {
            parts.push(format!("I take {}.", self.persona.prescriptions));
        }
        if !parts.is_empty() {
            return parts.join(" ");
        }
        if found.contains(&Stage::Disclaimer) {
            return "Okay, I understand. Go on.".to_string();
        }
        if found.contains(&Stage::RecordingNotice) {
            return match self.persona.difficulty {
                Difficulty::Elite => "Recorded? Fine, I suppose. Get to the point.".to_string(),
                _ => "That's fine, go ahead.".to_string(),
            };
        }
        if found.contains(&Stage::Introduction) {
            return match self.persona.difficulty {
                Difficulty::Beginner => "Oh hi, nice to meet you. What's this about?".to_string(),
                Difficulty::Advanced => "Okay... what's this about?".to_string(),
                Difficulty::Elite => format!(
                    "How did you get my number? I get these calls all day here in {}.",
                    self.persona.state
                ),
            };
        }
        if self.objection_open {
            return "You didn't answer my question.".to_string();
        }
        self.nudge()
    }

    fn on_presentation(&mut self) -> String {
        if let Some(objection) = self.objections.pop() {
            self.objection_open = true;
            return format!("Hmm. {objection}");
        }
        "That sounds better than what I have now.".to_string()
    }

    fn on_close(&mut self) -> String {
        if self.objection_open {
            return "Hold on, you haven't answered my question yet.".to_string();
        }
        if let Some(objection) = self.objections.pop() {
            self.objection_open = true;
            return format!("Wait, before I sign anything. {objection}");
        }
        "Alright, let's do it. What do you need from me?".to_string()
    }

    fn after_objection_answered(&mut self) -> String {
        match self.persona.difficulty {
            Difficulty::Beginner => "Oh, that's good to hear. Thank you.".to_string(),
            Difficulty::Advanced => "Okay, that makes me feel a little better.".to_string(),
            Difficulty::Elite => "Fine. I'm still not convinced, but go on.".to_string(),
        }
    }

    fn nudge(&mut self) -> String {
        self.nudges += 1;
        let has = |s: Stage| self.covered.contains(&s);
        if !has(Stage::Introduction) {
            return "Sorry, who did you say you were?".to_string();
        }
        if !has(Stage::DoctorsDiscovery) && !has(Stage::PrescriptionsDiscovery) {
            return "So what is it you wanted to ask me?".to_string();
        }
        if !has(Stage::PlanPresentation) {
            return "So what kind of plan are we talking about?".to_string();
        }
        if self.nudges.is_multiple_of(2) {
            "I'm still here. What happens next?".to_string()
        } else {
            "Sorry, could you say that again? I didn't follow.".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::practice::catalog::Drill;

    fn persona(difficulty: Difficulty) -> ScriptedPersona {
        let p = Drill::MaFullSale
            .pick_persona(difficulty, None, 0)
            .expect("pool has personas");
        ScriptedPersona::new(p)
    }

    #[test]
    fn greeting_depends_on_difficulty() {
        assert!(persona(Difficulty::Beginner).greeting().contains("Dorothy"));
        assert!(persona(Difficulty::Elite).greeting().contains("busy"));
    }

    #[test]
    fn discovery_answers_name_the_personas_doctor_and_prescriptions() {
        let mut s = persona(Difficulty::Advanced);
        let r = s.reply("Which doctors do you see, and what prescriptions do you take?");
        assert!(r.contains("Dr. Feldman") && r.contains("Eliquis"), "{r}");
    }

    #[test]
    fn advanced_raises_two_objections_then_agrees_to_close() {
        let mut s = persona(Difficulty::Advanced);
        assert!(stages::is_objection(
            &s.reply("This plan has a $0 premium and $5 copays.")
        ));
        assert!(
            s.reply("Let's get you enrolled.")
                .contains("haven't answered")
        );
        assert!(!stages::is_objection(
            &s.reply("I understand, the premium is $0 so nothing changes.")
        ));
        assert!(stages::is_objection(&s.reply("Shall we enroll you?")));
        s.reply("Great question, Dr. Feldman is in network.");
        assert!(
            s.reply("Can I get you enrolled today?")
                .contains("let's do it")
        );
    }

    #[test]
    fn beginner_raises_one_objection_and_elite_three() {
        let mut b = persona(Difficulty::Beginner);
        assert!(stages::is_objection(&b.reply("The premium is $0.")));
        b.reply("I understand.");
        assert!(b.reply("Let's enroll you.").contains("let's do it"));

        let mut e = persona(Difficulty::Elite);
        let mut objections = 0;
        for _ in 0..5 {
            if stages::is_objection(&e.reply("Let's enroll you in this plan.")) {
                objections += 1;
            }
            e.reply("I understand your concern.");
        }
        assert_eq!(objections, 3);
    }

    #[test]
    fn the_persona_always_answers_and_never_hangs_up() {
        let mut s = persona(Difficulty::Elite);
        for line in ["", "blah", "???", "blah", "hello"] {
            assert!(!s.reply(line).trim().is_empty());
        }
    }

    #[test]
    fn the_same_conversation_gets_the_same_replies() {
        let lines = [
            "Hi, my name is Sam",
            "Is it okay if I ask about your doctors?",
            "The premium is $0",
        ];
        let mut a = persona(Difficulty::Advanced);
        let mut b = persona(Difficulty::Advanced);
        for line in lines {
            assert_eq!(a.reply(line), b.reply(line));
        }
    }
}
