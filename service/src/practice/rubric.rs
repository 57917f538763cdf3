//! The deterministic scoring rubric of `ma-full-sale`: which stages of an enrollment call the rep
//! covered, which compliance items held, and from those an `overallScore` (0–100), a
//! `compliancePercent`, a summary and actionable feedback naming what was and was not done.
//!
//! Weights: introduction 10, recording notice 10, disclaimer 15, doctors 10, prescriptions 10,
//! plan presentation 15, objection handling 15, close 15 (100 in all). The overall score is 75 %
//! the stage points and 25 % the compliance percentage, rounded. Objection handling is credited
//! when the rep answers each customer objection in the next rep turn, or when the rep presented
//! a plan and the customer raised none.

use super::stages::{self, ComplianceItem, Stage};
use super::transcript::{Role, Turn};

/// The score of one call, as the contract's Score object.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// 0–100, higher is better.
    pub overall_score: u32,
    /// 0–100: the share of compliance items that held.
    pub compliance_percent: u32,
    /// What the call covered, in a sentence or two.
    pub summary: String,
    /// What to keep doing and what to do next time, one item per line.
    pub feedback: String,
}

/// Why a call could not be scored (the webhook's `reasonMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotScored {
    /// The rep never said anything.
    RepNeverSpoke,
}

impl NotScored {
    /// A human-readable reason, sent as `reasonMessage`.
    pub fn message(&self) -> &'static str {
        match self {
            NotScored::RepNeverSpoke => {
                "The rep never spoke during the call, so there was nothing to score."
            }
        }
    }
}

fn weight(stage: Stage) -> u32 {
    match stage {
        Stage::Introduction
        | Stage::RecordingNotice
        | Stage::DoctorsDiscovery
        | Stage::PrescriptionsDiscovery => 10,
        Stage::Disclaimer | Stage::PlanPresentation | Stage::ObjectionHandling | Stage::Close => 15,
    }
}

fn advice(stage: Stage) -> &'static str {
    match stage {
        Stage::Introduction => "Open by giving your name, your company and why you are calling.",
        Stage::RecordingNotice => {
            "Tell the customer the call is recorded before discussing anything else."
        }
        Stage::Disclaimer => {
            "Read the required disclaimer: \"We do not offer every plan available in your area; contact Medicare.gov or 1-800-MEDICARE for all of your options.\""
        }
        Stage::DoctorsDiscovery => {
            "Ask which doctors and specialists the customer sees, so you can check the network."
        }
        Stage::PrescriptionsDiscovery => {
            "Ask which prescriptions the customer takes, so you can check the formulary."
        }
        Stage::PlanPresentation => {
            "Present a specific plan: the premium, copays, deductible and the extra benefits."
        }
        Stage::ObjectionHandling => {
            "When the customer raises a concern, acknowledge it (\"I understand\") and answer it before moving on."
        }
        Stage::Close => {
            "Ask for the enrollment: offer to start the application and set the effective date."
        }
    }
}

fn compliance_advice(item: ComplianceItem) -> &'static str {
    match item {
        ComplianceItem::RecordingNotice => "State that the call is recorded.",
        ComplianceItem::PlanDisclaimer => "Give the not-every-plan disclaimer word for word.",
        ComplianceItem::LicensedAgent => "Identify yourself as a licensed insurance agent.",
        ComplianceItem::Permission => {
            "Ask permission before asking about health details or presenting plans."
        }
        ComplianceItem::NoProhibitedClaims => {
            "Never guarantee outcomes or suggest you are calling from Medicare or the government."
        }
    }
}

/// Scores a finished `ma-full-sale` transcript, or says why it cannot be scored.
///
/// # Errors
/// [`NotScored::RepNeverSpoke`] when no rep turn has any content.
pub fn score(turns: &[Turn]) -> Result<Score, NotScored> {
    if !super::transcript::rep_spoke(turns) {
        return Err(NotScored::RepNeverSpoke);
    }
    let mut covered: Vec<Stage> = Vec::new();
    let mut licensed = false;
    let mut permission = false;
    let mut claims: Vec<&'static str> = Vec::new();
    let mut objections = 0u32;
    let mut answered = 0u32;
    let mut pending_objection = false;
    for turn in turns {
        match turn.role {
            Role::Customer => {
                if stages::is_objection(&turn.content) {
                    objections += 1;
                    pending_objection = true;
                }
            }
            Role::Agent => {
                for stage in stages::stages_in(&turn.content) {
                    if !covered.contains(&stage) {
                        covered.push(stage);
                    }
                }
                if pending_objection && stages::addresses_objection(&turn.content) {
                    answered += 1;
                }
                pending_objection = false;
                licensed |= stages::says_licensed(&turn.content);
                permission |= stages::asks_permission(&turn.content);
                if let Some(claim) = stages::prohibited_claim(&turn.content)
                    && !claims.contains(&claim)
                {
                    claims.push(claim);
                }
            }
        }
    }
    let objections_ok = if objections > 0 {
        answered == objections
    } else {
        covered.contains(&Stage::PlanPresentation)
    };
    if objections_ok {
        covered.push(Stage::ObjectionHandling);
    }
    let compliance = |item: ComplianceItem| match item {
        ComplianceItem::RecordingNotice => covered.contains(&Stage::RecordingNotice),
        ComplianceItem::PlanDisclaimer => covered.contains(&Stage::Disclaimer),
        ComplianceItem::LicensedAgent => licensed,
        ComplianceItem::Permission => permission,
        ComplianceItem::NoProhibitedClaims => claims.is_empty(),
    };
    let held: Vec<ComplianceItem> = ComplianceItem::ALL
        .into_iter()
        .filter(|i| compliance(*i))
        .collect();
    let compliance_percent = (held.len() as u32 * 100) / ComplianceItem::ALL.len() as u32;
    let stage_points: u32 = Stage::ALL
        .iter()
        .filter(|s| covered.contains(s))
        .map(|s| weight(*s))
        .sum();
    let overall_score = (stage_points * 3 + compliance_percent + 2) / 4;

    let done: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|s| covered.contains(s))
        .collect();
    let missed: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|s| !covered.contains(s))
        .collect();
    let summary = summary(&done, &missed, compliance_percent, objections, answered);
    let mut feedback = Vec::new();
    if !done.is_empty() {
        feedback.push(format!(
            "Done well: {}.",
            join(done.iter().map(|s| s.label()))
        ));
    }
    for stage in &missed {
        feedback.push(format!("Missing {}: {}", stage.label(), advice(*stage)));
    }
    for item in ComplianceItem::ALL {
        if !held.contains(&item)
            && !matches!(
                item,
                ComplianceItem::RecordingNotice | ComplianceItem::PlanDisclaimer
            )
        {
            feedback.push(format!(
                "Compliance, {}: {}",
                item.label(),
                compliance_advice(item)
            ));
        }
    }
    if !claims.is_empty() {
        feedback.push(format!(
            "Avoid these phrases: {}.",
            join(claims.iter().map(|c| format!("\"{c}\"")))
        ));
    }
    if missed.is_empty() && held.len() == ComplianceItem::ALL.len() {
        feedback.push("A complete, compliant call: keep this structure.".to_string());
    }
    Ok(Score {
        overall_score,
        compliance_percent,
        summary,
        feedback: feedback.join("\n"),
    })
}

fn summary(
    done: &[Stage],
    missed: &[Stage],
    compliance: u32,
    objections: u32,
    answered: u32,
) -> String {
    let mut text = format!("Covered {} of {} stages", done.len(), Stage::ALL.len());
    if !done.is_empty() {
        text.push_str(&format!(" ({})", join(done.iter().map(|s| s.label()))));
    }
    text.push('.');
    if !missed.is_empty() {
        text.push_str(&format!(
            " Missed: {}.",
            join(missed.iter().map(|s| s.label()))
        ));
    }
    if objections > 0 {
        text.push_str(&format!(
            " Answered {answered} of {objections} customer objections."
        ));
    }
    text.push_str(&format!(" Compliance {compliance}%."));
    text
}

fn join<S: AsRef<str>>(items: impl Iterator<Item = S>) -> String {
    items
        .map(|s| s.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good_call() -> Vec<Turn> {
        vec![
            Turn::customer("Hello? Who's calling?"),
            Turn::agent(
                "Hi, my name is Sam, I'm a licensed insurance agent calling from Acme Health. This call is recorded.",
            ),
            Turn::customer("That's fine, go ahead."),
            Turn::agent(
                "We do not offer every plan available in your area; contact Medicare.gov or 1-800-MEDICARE for all of your options.",
            ),
            Turn::customer("Okay, I understand. Go on."),
            Turn::agent(
                "Is it okay if I ask which doctors you see and what prescriptions you take?",
            ),
            Turn::customer("I see Dr. Feldman. I take Eliquis."),
            Turn::agent("This plan has a $0 premium, $5 copays and dental benefits."),
            Turn::customer("Hmm. I'm worried about the cost."),
            Turn::agent("I understand. With a $0 premium your costs go down."),
            Turn::customer("Okay."),
            Turn::agent("Shall we get you enrolled with a January effective date?"),
            Turn::customer("Alright, let's do it."),
        ]
    }

    #[test]
    fn a_complete_compliant_call_scores_100() {
        let s = score(&good_call()).expect("scored");
        assert_eq!(s.overall_score, 100);
        assert_eq!(s.compliance_percent, 100);
        assert!(
            s.summary.starts_with("Covered 8 of 8 stages"),
            "{}",
            s.summary
        );
        assert!(s.feedback.contains("keep this structure"));
    }

    #[test]
    fn a_poor_call_scores_low_and_names_what_was_missed() {
        let turns = vec![
            Turn::customer("Hello?"),
            Turn::agent("Hey, want to buy some insurance? I guarantee you'll save money."),
            Turn::customer("Sorry, who did you say you were?"),
        ];
        let s = score(&turns).expect("scored");
        assert!(s.overall_score < 20, "{}", s.overall_score);
        assert_eq!(s.compliance_percent, 0);
        assert!(
            s.summary
                .contains("Missed: introduction, recording notice, plan disclaimer"),
            "{}",
            s.summary
        );
        assert!(s.feedback.contains("Missing plan disclaimer"));
        assert!(s.feedback.contains("\"guarantee\""));
    }

    #[test]
    fn an_unanswered_objection_loses_objection_handling() {
        let mut turns = good_call();
        turns[9] = Turn::agent("Anyway, moving on.");
        let s = score(&turns).expect("scored");
        assert_eq!(s.overall_score, 89);
        assert!(s.summary.contains("Answered 0 of 1 customer objections"));
        assert!(s.feedback.contains("Missing objection handling"));
    }

    #[test]
    fn a_rep_who_never_spoke_is_not_scored() {
        let turns = vec![Turn::customer("Hello?"), Turn::agent("   ")];
        assert_eq!(score(&turns), Err(NotScored::RepNeverSpoke));
        assert_eq!(score(&[]), Err(NotScored::RepNeverSpoke));
    }

    #[test]
    fn scores_stay_within_bounds_for_any_mix_of_lines() {
        let lines = [
            "my name is",
            "recorded",
            "guarantee",
            "premium",
            "enroll",
            "doctor",
            "I understand",
            "",
        ];
        for a in lines {
            for b in lines {
                let s = score(&[
                    Turn::agent(a),
                    Turn::customer("I'm worried"),
                    Turn::agent(b),
                ]);
                if let Ok(s) = s {
                    assert!(s.overall_score <= 100 && s.compliance_percent <= 100);
                }
            }
        }
    }
}
