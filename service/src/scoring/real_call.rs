//! Scoring a real call, deterministically, from its transcript, disposition and product line,
//! with the rubric engine practice calls use ([`crate::practice::rubric`] and the phrase
//! recognisers of [`crate::practice::stages`]).
//!
//! - Not scored (`SCORING_INCOMPLETE`): no rep turn with any content.
//! - `overallScore`: 0 when the rep spoke fewer than [`MIN_REP_TURNS`] turns (no headline score
//!   can be produced from so little); otherwise 85% of the rubric's 0-100 points plus the
//!   disposition's (sale 15, callback 10, no sale 5, not interested 0), mapped onto the
//!   contract's 60-100 band: `60 + points * 40 / 100`, rounded. The disposition weighs the
//!   same on every call, so a re-disposition always moves the headline, a flawless
//!   conversation's too (added to the rubric's points and clamped at 100, a sale and a no sale
//!   of a flawless call both scored 100).
//! - `compliancePercent`: always (every scored real call is assessed). On a default-rubric
//!   `health_plan_enrollment` call with disposition `sale`, the share of the eight scorecard
//!   checks that passed; on another `health_plan_enrollment` call or an agency graded by its own
//!   rubric, the share of the five compliance items of the practice rubric; on `other` product
//!   lines, of the four that do not name a health plan (the plan disclaimer is left out).
//! - `complianceScorecard`: only on a default-rubric `health_plan_enrollment` sale (contract
//!   section 2). Its shape (the contract leaves it open) is
//!   `{ "version": 1, "rubric": "health_plan_enrollment", "passed": n, "total": 8,
//!   "checks": [ { "id", "label", "passed", "evidence": [turn indexes] } ] }`, where `evidence`
//!   lists the 0-based indexes of the transcript turns that satisfy a check (for
//!   `noProhibitedClaims`, the turns that break it).
//!
//! A re-disposition scores the same transcript again with the new disposition, so the score,
//! `compliancePercent` and the scorecard can all change.

use serde::Serialize;
use serde_json::{Value, json};

use crate::db::Rubric;
use crate::practice::rubric;
use crate::practice::stages::{self, Stage};
use crate::practice::transcript::{Role, Turn};

/// Fewer rep turns than this and no headline score can be produced (`overallScore` 0).
pub const MIN_REP_TURNS: usize = 2;

/// What a real call ended with, as the dialer records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The customer bought.
    Sale,
    /// The customer did not buy.
    NoSale,
    /// A callback was arranged.
    Callback,
    /// The customer declined to talk.
    NotInterested,
}

impl Disposition {
    /// Every disposition, as written.
    pub const NAMES: [&'static str; 4] = ["sale", "no_sale", "callback", "not_interested"];

    /// Reads a disposition as the dialer writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "sale" => Some(Self::Sale),
            "no_sale" => Some(Self::NoSale),
            "callback" => Some(Self::Callback),
            "not_interested" => Some(Self::NotInterested),
            _ => None,
        }
    }

    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sale => "sale",
            Self::NoSale => "no_sale",
            Self::Callback => "callback",
            Self::NotInterested => "not_interested",
        }
    }

    /// Its share of the headline's 100 points (the rubric has the other 85).
    fn points(self) -> i32 {
        match self {
            Self::Sale => 15,
            Self::Callback => 10,
            Self::NoSale => 5,
            Self::NotInterested => 0,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Sale => "sale",
            Self::NoSale => "no sale",
            Self::Callback => "callback arranged",
            Self::NotInterested => "not interested",
        }
    }
}

/// What a real call sold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductLine {
    /// A health-plan enrollment call (the rubric's own subject).
    HealthPlanEnrollment,
    /// Any other product.
    Other,
}

impl ProductLine {
    /// Every product line, as written.
    pub const NAMES: [&'static str; 2] = ["health_plan_enrollment", "other"];

    /// Reads a product line as the dialer writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "health_plan_enrollment" => Some(Self::HealthPlanEnrollment),
            "other" => Some(Self::Other),
            _ => None,
        }
    }

    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HealthPlanEnrollment => "health_plan_enrollment",
            Self::Other => "other",
        }
    }
}

/// One check of the compliance scorecard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable key.
    pub id: &'static str,
    /// What is checked.
    pub label: &'static str,
    /// Whether it held.
    pub passed: bool,
    /// Transcript turn indexes (0-based) that satisfy it, or that break it for
    /// `noProhibitedClaims`.
    pub evidence: Vec<usize>,
}

/// The score document stored for a scored real call (the contract's Score).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RealScore {
    /// 60-100, or 0 when no headline score could be produced.
    pub overall_score: u32,
    /// Short natural-language summary.
    pub summary: String,
    /// Coaching feedback.
    pub feedback: String,
    /// 0-100.
    pub compliance_percent: u32,
    /// Only on a default-rubric health-plan sale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compliance_scorecard: Option<Value>,
}

/// What is scored.
#[derive(Debug, Clone, Copy)]
pub struct RealCall<'a> {
    /// The transcript's turns, in order.
    pub turns: &'a [Turn],
    /// The disposition.
    pub disposition: Disposition,
    /// The product line.
    pub product_line: ProductLine,
    /// The agency's rubric.
    pub rubric: Rubric,
}

/// Why a real call cannot be scored (the webhook's `reasonMessage`).
pub const NO_REP_TURN: &str =
    "The transcript has no turn by the rep, so there was nothing to score.";

/// Scores a real call, or says why it cannot be.
///
/// # Errors
/// [`NO_REP_TURN`] when no rep turn has any content.
pub fn score(call: RealCall<'_>) -> Result<RealScore, &'static str> {
    let Ok(graded) = rubric::score(call.turns) else {
        return Err(NO_REP_TURN);
    };
    let checks = checks(call.turns);
    let with_scorecard = call.rubric == Rubric::Default
        && call.product_line == ProductLine::HealthPlanEnrollment
        && call.disposition == Disposition::Sale;
    let counted: Vec<&Check> = checks
        .iter()
        .filter(|c| match (with_scorecard, call.product_line) {
            (true, _) => true,
            (false, ProductLine::HealthPlanEnrollment) => COMPLIANCE_ITEMS.contains(&c.id),
            (false, ProductLine::Other) => {
                COMPLIANCE_ITEMS.contains(&c.id) && c.id != "planDisclaimer"
            }
        })
        .collect();
    let passed = counted.iter().filter(|c| c.passed).count();
    let compliance_percent = u32::try_from(passed * 100 / counted.len().max(1)).unwrap_or(100);
    let rep_turns = call
        .turns
        .iter()
        .filter(|t| t.role == Role::Agent && !t.content.trim().is_empty())
        .count();
    let (overall_score, summary) = if rep_turns < MIN_REP_TURNS {
        (
            0,
            format!(
                "Too little of the rep to produce a headline score ({rep_turns} turn). \
                 Disposition: {}.",
                call.disposition.label()
            ),
        )
    } else {
        // In hundredths of a point: 85% of the rubric's 0-100, plus the disposition's 0-15.
        let rubric_points = i32::try_from(graded.overall_score)
            .unwrap_or(100)
            .clamp(0, 100);
        let points = rubric_points * 85 + call.disposition.points() * 100;
        let headline = 60 + (points * 40 + 5_000) / 10_000;
        // The practice rubric's summary ends with its own compliance figure; a real call's
        // is the one computed above.
        let covered = graded
            .summary
            .rfind(" Compliance ")
            .map_or(graded.summary.as_str(), |at| &graded.summary[..at]);
        (
            u32::try_from(headline).unwrap_or(60),
            format!(
                "{covered} Compliance {compliance_percent}%. Disposition: {}.",
                call.disposition.label()
            ),
        )
    };
    let compliance_scorecard = with_scorecard.then(|| {
        json!({
            "version": 1,
            "rubric": ProductLine::HealthPlanEnrollment.as_str(),
            "passed": passed,
            "total": checks.len(),
            "checks": checks,
        })
    });
    Ok(RealScore {
        overall_score,
        summary,
        feedback: graded.feedback,
        compliance_percent,
        compliance_scorecard,
    })
}

/// The checks that make up the practice rubric's five compliance items.
const COMPLIANCE_ITEMS: [&str; 5] = [
    "recordingNotice",
    "planDisclaimer",
    "licensedAgent",
    "permission",
    "noProhibitedClaims",
];

/// Every scorecard check, with the turns that bear on it.
fn checks(turns: &[Turn]) -> Vec<Check> {
    let rep = |test: &dyn Fn(&str) -> bool| -> Vec<usize> {
        turns
            .iter()
            .enumerate()
            .filter(|(_, t)| t.role == Role::Agent && test(&t.content))
            .map(|(i, _)| i)
            .collect()
    };
    let stage = |stage: Stage| rep(&move |text: &str| stages::stages_in(text).contains(&stage));
    let held = |id, label, evidence: Vec<usize>| Check {
        id,
        label,
        passed: !evidence.is_empty(),
        evidence,
    };
    let claims = rep(&|text: &str| stages::prohibited_claim(text).is_some());
    vec![
        held(
            "recordingNotice",
            "The rep said the call is recorded",
            stage(Stage::RecordingNotice),
        ),
        held(
            "planDisclaimer",
            "The rep gave the not-every-plan disclaimer",
            stage(Stage::Disclaimer),
        ),
        held(
            "licensedAgent",
            "The rep identified as a licensed agent",
            rep(&stages::says_licensed),
        ),
        held(
            "permission",
            "The rep asked permission before discussing plans",
            rep(&stages::asks_permission),
        ),
        Check {
            id: "noProhibitedClaims",
            label: "The rep made no prohibited claim",
            passed: claims.is_empty(),
            evidence: claims,
        },
        held(
            "doctorsReviewed",
            "The rep reviewed the customer's doctors",
            stage(Stage::DoctorsDiscovery),
        ),
        held(
            "prescriptionsReviewed",
            "The rep reviewed the customer's prescriptions",
            stage(Stage::PrescriptionsDiscovery),
        ),
        held(
            "enrollmentConfirmed",
            "The rep asked for and confirmed the enrollment",
            stage(Stage::Close),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_sale() -> Vec<Turn> {
        vec![
            Turn::customer("Hello?"),
            Turn::agent(
                "Hi, my name is Ada, I'm a licensed insurance agent. This call is recorded.",
            ),
            Turn::agent(
                "We do not offer every plan available in your area; please contact Medicare.gov or 1-800-MEDICARE for all of your options.",
            ),
            Turn::agent("May I ask which doctors you see and what prescriptions you take?"),
            Turn::customer("Dr. Lee, and metformin."),
            Turn::agent("This plan has a zero premium and low copays, and keeps Dr. Lee."),
            Turn::agent("Would you like to enroll today? I can start the application now."),
        ]
    }

    fn call(turns: &[Turn], disposition: Disposition) -> RealCall<'_> {
        RealCall {
            turns,
            disposition,
            product_line: ProductLine::HealthPlanEnrollment,
            rubric: Rubric::Default,
        }
    }

    #[test]
    fn a_default_rubric_health_plan_sale_carries_an_itemised_scorecard_with_evidence() {
        let turns = full_sale();
        let score = score(call(&turns, Disposition::Sale)).expect("scored");
        assert!((60..=100).contains(&score.overall_score), "{score:?}");
        let card = score.compliance_scorecard.expect("a scorecard");
        assert_eq!(card["total"], 8);
        let checks = card["checks"].as_array().expect("checks");
        let recording = checks
            .iter()
            .find(|c| c["id"] == "recordingNotice")
            .expect("recording check");
        assert_eq!(recording["passed"], true);
        assert_eq!(recording["evidence"], json!([1]));
        let passed = checks.iter().filter(|c| c["passed"] == true).count();
        assert_eq!(card["passed"], passed);
        assert_eq!(score.compliance_percent as usize, passed * 100 / 8);
    }

    #[test]
    fn no_scorecard_without_a_default_rubric_health_plan_sale() {
        let turns = full_sale();
        for (disposition, product_line, rubric) in [
            (
                Disposition::NoSale,
                ProductLine::HealthPlanEnrollment,
                Rubric::Default,
            ),
            (Disposition::Sale, ProductLine::Other, Rubric::Default),
            (
                Disposition::Sale,
                ProductLine::HealthPlanEnrollment,
                Rubric::Own,
            ),
        ] {
            let score = score(RealCall {
                turns: &turns,
                disposition,
                product_line,
                rubric,
            })
            .expect("scored");
            assert!(score.compliance_scorecard.is_none());
            assert!(score.compliance_percent <= 100);
        }
    }

    #[test]
    fn the_disposition_moves_the_headline_within_the_real_call_band() {
        let turns = full_sale();
        let sale = score(call(&turns, Disposition::Sale)).expect("scored");
        let no = score(call(&turns, Disposition::NotInterested)).expect("scored");
        assert!(sale.overall_score > no.overall_score);
        assert!(no.overall_score >= 60);
        assert!(
            sale.summary.ends_with(&format!(
                "Compliance {}%. Disposition: sale.",
                sale.compliance_percent
            )),
            "{}",
            sale.summary
        );
    }

    /// Issue 44: a flawless sale re-dispositioned as a no sale printed "overallScore 100 ->
    /// 100"; every disposition now moves the headline of every call.
    #[test]
    fn each_disposition_moves_even_a_flawless_calls_headline() {
        let turns = full_sale();
        let headlines: Vec<u32> = [
            Disposition::Sale,
            Disposition::Callback,
            Disposition::NoSale,
            Disposition::NotInterested,
        ]
        .into_iter()
        .map(|d| score(call(&turns, d)).expect("scored").overall_score)
        .collect();
        assert!(
            headlines.windows(2).all(|w| w[0] > w[1]),
            "strictly apart: {headlines:?}"
        );
        assert!(headlines.iter().all(|h| (60..=100).contains(h)), "{headlines:?}");
    }

    #[test]
    fn too_little_of_the_rep_gives_no_headline_and_no_rep_turn_no_score() {
        let one = vec![Turn::customer("Hello?"), Turn::agent("Hi, this is Ada.")];
        let score_one = score(call(&one, Disposition::NoSale)).expect("scored");
        assert_eq!(score_one.overall_score, 0);
        let silent = vec![Turn::customer("Hello?"), Turn::agent("   ")];
        assert_eq!(score(call(&silent, Disposition::NoSale)), Err(NO_REP_TURN));
    }
}
