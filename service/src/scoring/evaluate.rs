//! The pure scoring step: runs the drill's rubric over a stored transcript and builds the
//! `call.scored` body (with `svc-contract`'s [`CallScored`], so body and verifier agree).
//! A call with no transcript (it never completed), an unknown drill, a transcript that does not
//! decode, or a rep who never spoke is not scored: `success: false`, `SCORING_INCOMPLETE`.

use serde::Serialize;
use svc_contract::{CallScored, CallSource, FailureReason};

use crate::practice::catalog::Drill;
use crate::practice::rubric::{self, NotScored};
use crate::practice::transcript::Turn;

/// The score the rubric stores for a practice call: the contract's Score with whole numbers and
/// without the real-call keys (GET /calls/{callId} reads it back as
/// [`crate::api::call_detail::Score`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreDoc {
    /// 0–100, higher is better.
    pub overall_score: u32,
    /// Short natural-language summary.
    pub summary: String,
    /// Coaching feedback.
    pub feedback: String,
    /// 0–100; the rubric always assesses compliance.
    pub compliance_percent: u32,
}

/// The outcome of scoring one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Scored; the score document to store.
    Scored(ScoreDoc),
    /// Not scored; the human-readable reason for `reasonMessage`.
    NotScored(String),
}

/// Scores a finished call of `drill_key` from its stored transcript JSON.
pub fn evaluate(drill_key: Option<&str>, transcript_json: Option<&str>) -> Outcome {
    let Some(transcript_json) = transcript_json else {
        return Outcome::NotScored(
            "The call never completed (the live connection was cut off).".to_string(),
        );
    };
    let Ok(turns) = serde_json::from_str::<Vec<Turn>>(transcript_json) else {
        return Outcome::NotScored("Scoring failed: the transcript could not be read.".to_string());
    };
    match drill_key.and_then(Drill::find) {
        Some(Drill::MaFullSale) => match rubric::score(&turns) {
            Ok(score) => Outcome::Scored(ScoreDoc {
                overall_score: score.overall_score,
                summary: score.summary,
                feedback: score.feedback,
                compliance_percent: score.compliance_percent,
            }),
            Err(reason @ NotScored::RepNeverSpoke) => {
                Outcome::NotScored(reason.message().to_string())
            }
        },
        _ => Outcome::NotScored("Scoring failed: no rubric exists for this drill.".to_string()),
    }
}

/// The ids a webhook echoes.
#[derive(Debug, Clone)]
pub struct EventIds<'a> {
    /// Public call id.
    pub call_id: &'a str,
    /// Service agent id.
    pub agent_id: &'a str,
    /// Service agency id.
    pub agency_id: &'a str,
    /// Tenant agent id.
    pub platform_agent_id: Option<&'a str>,
    /// Tenant agency id.
    pub platform_agency_id: Option<&'a str>,
    /// The earlier mint form's rep label; on the body only when set.
    pub external_user_id: Option<&'a str>,
    /// The earlier mint form's agency label; on the body only when set.
    pub external_agency_id: Option<&'a str>,
}

/// The `call.scored` body of a practice call's outcome (see [`event_for`]).
pub fn event(
    ids: &EventIds<'_>,
    outcome: &Outcome,
    occurred_at: String,
    request_id: String,
) -> CallScored {
    let not_scored = match outcome {
        Outcome::Scored(_) => None,
        Outcome::NotScored(message) => Some(message.as_str()),
    };
    event_for(
        ids,
        CallSource::Roleplay,
        not_scored,
        occurred_at,
        request_id,
    )
}

/// The `call.scored` body of a call of `source`: never a score or transcript; `reason`
/// (`SCORING_INCOMPLETE`) and `reasonMessage` only when not scored (`not_scored` says why).
pub fn event_for(
    ids: &EventIds<'_>,
    source: CallSource,
    not_scored: Option<&str>,
    occurred_at: String,
    request_id: String,
) -> CallScored {
    let mut event = CallScored::scored(
        ids.call_id,
        source,
        ids.agent_id,
        ids.agency_id,
        occurred_at,
        request_id,
    );
    event.platform_agent_id = ids.platform_agent_id.map(str::to_string);
    event.platform_agency_id = ids.platform_agency_id.map(str::to_string);
    event.external_user_id = ids.external_user_id.map(str::to_string);
    event.external_agency_id = ids.external_agency_id.map(str::to_string);
    match not_scored {
        None => event,
        Some(message) => event.not_scored(FailureReason::ScoringIncomplete, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> EventIds<'static> {
        EventIds {
            call_id: "svc_call_1",
            agent_id: "svc_agent_1",
            agency_id: "svc_agency_1",
            platform_agent_id: Some("rep-1"),
            platform_agency_id: None,
            external_user_id: None,
            external_agency_id: None,
        }
    }

    #[test]
    fn a_call_that_never_completed_or_a_silent_rep_is_not_scored() {
        assert!(
            matches!(evaluate(Some("ma-full-sale"), None), Outcome::NotScored(m) if m.contains("never completed"))
        );
        let silent = r#"[{"role":"customer","content":"Hello?"}]"#;
        assert!(
            matches!(evaluate(Some("ma-full-sale"), Some(silent)), Outcome::NotScored(m) if m.contains("never spoke"))
        );
        assert!(matches!(
            evaluate(Some("ma-full-sale"), Some("{")),
            Outcome::NotScored(_)
        ));
        let spoke = r#"[{"role":"agent","content":"Hi, my name is Sam"}]"#;
        assert!(matches!(
            evaluate(Some("fe-closing"), Some(spoke)),
            Outcome::NotScored(_)
        ));
        assert!(matches!(
            evaluate(Some("ma-full-sale"), Some(spoke)),
            Outcome::Scored(_)
        ));
    }

    #[test]
    fn the_success_event_has_no_reason_and_no_score() {
        let outcome = evaluate(
            Some("ma-full-sale"),
            Some(r#"[{"role":"agent","content":"my name is Sam"}]"#),
        );
        let body = serde_json::to_value(event(
            &ids(),
            &outcome,
            "2026-01-01T00:00:00.000Z".into(),
            "req_1".into(),
        ))
        .expect("json");
        assert_eq!(body["event"], "call.scored");
        assert_eq!(body["success"], true);
        assert_eq!(body["source"], "roleplay");
        assert_eq!(body["platformAgentId"], "rep-1");
        assert!(body["platformAgencyId"].is_null());
        for absent in [
            "reason",
            "reasonMessage",
            "score",
            "transcript",
            "overallScore",
        ] {
            assert!(body.get(absent).is_none(), "{absent} present");
        }
    }

    #[test]
    fn the_failure_event_carries_scoring_incomplete_and_a_message() {
        let body = serde_json::to_value(event(
            &ids(),
            &Outcome::NotScored("why".into()),
            "t".into(),
            "req_1".into(),
        ))
        .expect("json");
        assert_eq!(body["success"], false);
        assert_eq!(body["reason"], "SCORING_INCOMPLETE");
        assert_eq!(body["reasonMessage"], "why");
    }
}
