//! Recognises what a line of a health-plan enrollment call does: which stage of the call a rep
//! utterance covers, which compliance items it satisfies or breaks, and whether a customer line
//! is an objection. Shared by the scripted persona (to answer) and the rubric (to score), so the
//! two always agree. Matching is by plain phrases on lowercased text: deterministic and explainable.

/// A stage of an `ma-full-sale` call, in the order a good call covers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// The rep says who they are and why they call.
    Introduction,
    /// The rep says the call is recorded.
    RecordingNotice,
    /// The rep says not every plan available in the area is offered.
    Disclaimer,
    /// The rep asks about the customer's doctors.
    DoctorsDiscovery,
    /// The rep asks about the customer's prescriptions.
    PrescriptionsDiscovery,
    /// The rep presents a plan: premium, copays, benefits.
    PlanPresentation,
    /// The rep answers an objection the customer raised.
    ObjectionHandling,
    /// The rep asks for the enrollment.
    Close,
}

impl Stage {
    /// Every stage in call order.
    pub const ALL: [Stage; 8] = [
        Stage::Introduction,
        Stage::RecordingNotice,
        Stage::Disclaimer,
        Stage::DoctorsDiscovery,
        Stage::PrescriptionsDiscovery,
        Stage::PlanPresentation,
        Stage::ObjectionHandling,
        Stage::Close,
    ];

    /// A short human name used in summaries.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Introduction => "introduction",
            Stage::RecordingNotice => "recording notice",
            Stage::Disclaimer => "plan disclaimer",
            Stage::DoctorsDiscovery => "doctors discovery",
            Stage::PrescriptionsDiscovery => "prescriptions discovery",
            Stage::PlanPresentation => "plan presentation",
            Stage::ObjectionHandling => "objection handling",
            Stage::Close => "close",
        }
    }
}

fn any(text: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| text.contains(p))
}

/// The stages a rep utterance covers (objection handling is judged by context, see
/// [`addresses_objection`], and is never returned here).
pub fn stages_in(utterance: &str) -> Vec<Stage> {
    let text = utterance.to_lowercase();
    let mut found = Vec::new();
    if any(
        &text,
        &[
            "my name is",
            "this is ",
            "calling from",
            "i'm with",
            "i am with",
            "calling on behalf",
            "i'm calling",
            "i am calling",
        ],
    ) {
        found.push(Stage::Introduction);
    }
    if any(&text, &["recorded", "recording"]) {
        found.push(Stage::RecordingNotice);
    }
    if is_disclaimer(&text) {
        found.push(Stage::Disclaimer);
    }
    if any(
        &text,
        &["doctor", "physician", "specialist", "provider", "dr."],
    ) {
        found.push(Stage::DoctorsDiscovery);
    }
    if any(
        &text,
        &[
            "prescription",
            "medication",
            "medicine",
            "drugs",
            "pharmacy",
            "pills",
        ],
    ) {
        found.push(Stage::PrescriptionsDiscovery);
    }
    if any(
        &text,
        &[
            "premium",
            "copay",
            "co-pay",
            "deductible",
            "out-of-pocket",
            "out of pocket",
            "dental",
            "vision",
            "hearing",
            "part d",
            "benefit",
        ],
    ) {
        found.push(Stage::PlanPresentation);
    }
    if any(
        &text,
        &[
            "enroll",
            "sign you up",
            "get you started",
            "start the application",
            "move forward",
            "effective date",
            "get you signed",
        ],
    ) {
        found.push(Stage::Close);
    }
    found
}

fn is_disclaimer(text: &str) -> bool {
    let negated_every_plan = text.contains("every plan")
        && any(
            text,
            &[
                "not offer",
                "don't offer",
                "do not offer",
                "not every plan",
                "doesn't offer",
                "may not",
            ],
        );
    negated_every_plan || any(text, &["medicare.gov", "1-800-medicare", "800-medicare"])
}

/// True when a customer line raises an objection.
pub fn is_objection(customer_line: &str) -> bool {
    let text = customer_line.to_lowercase();
    any(
        &text,
        &[
            "worried",
            "afraid",
            "can't afford",
            "cannot afford",
            "too expensive",
            "not sure about",
            "happy with what i have",
            "think about it",
            "talk to my",
            "don't want to lose",
            "i don't trust",
        ],
    )
}

/// True when a rep utterance answers an objection: it acknowledges the concern and answers it.
pub fn addresses_objection(utterance: &str) -> bool {
    let text = utterance.to_lowercase();
    any(
        &text,
        &[
            "understand",
            "hear you",
            "great question",
            "good question",
            "fair question",
            "makes sense",
            "i get that",
            "that's fair",
            "valid concern",
            "good point",
        ],
    )
}

/// A compliance item of an `ma-full-sale` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComplianceItem {
    /// The rep says the call is recorded.
    RecordingNotice,
    /// The rep gives the not-every-plan disclaimer.
    PlanDisclaimer,
    /// The rep identifies as a licensed agent.
    LicensedAgent,
    /// The rep asks permission before discussing plans.
    Permission,
    /// The rep makes no prohibited claim (guarantees, posing as Medicare or the government).
    NoProhibitedClaims,
}

impl ComplianceItem {
    /// Every compliance item.
    pub const ALL: [ComplianceItem; 5] = [
        ComplianceItem::RecordingNotice,
        ComplianceItem::PlanDisclaimer,
        ComplianceItem::LicensedAgent,
        ComplianceItem::Permission,
        ComplianceItem::NoProhibitedClaims,
    ];

    /// A short human name used in summaries.
    pub fn label(self) -> &'static str {
        match self {
            ComplianceItem::RecordingNotice => "recording notice",
            ComplianceItem::PlanDisclaimer => "not-every-plan disclaimer",
            ComplianceItem::LicensedAgent => "licensed-agent identification",
            ComplianceItem::Permission => "permission to discuss plans",
            ComplianceItem::NoProhibitedClaims => "no prohibited claims",
        }
    }
}

/// True when a rep utterance identifies the rep as licensed.
pub fn says_licensed(utterance: &str) -> bool {
    utterance.to_lowercase().contains("licensed")
}

/// True when a rep utterance asks the customer's permission.
pub fn asks_permission(utterance: &str) -> bool {
    let text = utterance.to_lowercase();
    any(
        &text,
        &[
            "permission",
            "is it okay",
            "is that okay",
            "is it ok",
            "would it be okay",
            "do you mind",
            "may i ask",
            "can i ask",
        ],
    )
}

/// The prohibited claim a rep utterance makes, if any, quoted for feedback.
pub fn prohibited_claim(utterance: &str) -> Option<&'static str> {
    let text = utterance.to_lowercase();
    [
        "guarantee",
        "free money",
        "calling from medicare",
        "i'm with medicare",
        "i am with medicare",
        "from the government",
        "government program",
    ]
    .into_iter()
    .find(|p| text.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_introduction_with_recording_notice_covers_both_stages() {
        let s = stages_in("Hi, my name is Sam, calling from Acme Health. This call is recorded.");
        assert_eq!(s, vec![Stage::Introduction, Stage::RecordingNotice]);
    }

    #[test]
    fn the_disclaimer_needs_the_negation_or_the_official_sources() {
        assert!(
            stages_in("We do not offer every plan available in your area.")
                .contains(&Stage::Disclaimer)
        );
        assert!(
            stages_in("Please contact Medicare.gov for all options").contains(&Stage::Disclaimer)
        );
        assert!(!stages_in("We offer every plan you could want").contains(&Stage::Disclaimer));
    }

    #[test]
    fn discovery_distinguishes_doctors_and_prescriptions() {
        assert_eq!(
            stages_in("Which doctors do you see?"),
            vec![Stage::DoctorsDiscovery]
        );
        assert_eq!(
            stages_in("What medications do you take?"),
            vec![Stage::PrescriptionsDiscovery]
        );
    }

    #[test]
    fn presentation_and_close_are_recognised() {
        assert!(
            stages_in("The premium is $0 and the copay is $5").contains(&Stage::PlanPresentation)
        );
        assert!(stages_in("Shall we get you enrolled today?").contains(&Stage::Close));
        assert!(stages_in("nice weather").is_empty());
    }

    #[test]
    fn objections_and_answers_are_recognised() {
        assert!(is_objection("I'm worried about the cost."));
        assert!(!is_objection("Okay, go ahead."));
        assert!(addresses_objection("I understand, and the premium is $0."));
        assert!(!addresses_objection("So anyway."));
    }

    #[test]
    fn compliance_phrases_are_recognised() {
        assert!(says_licensed("I'm a licensed insurance agent"));
        assert!(asks_permission("Is it okay if I ask a few questions?"));
        assert_eq!(
            prohibited_claim("I guarantee you'll save"),
            Some("guarantee")
        );
        assert_eq!(prohibited_claim("I can compare plans"), None);
    }
}
