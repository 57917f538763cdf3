//! The scored calls the bench seeds: half practice (`roleplay`), half `real_call`, spread
//! evenly over the last 20 days, each with a dozen transcript turns and a score shaped like the
//! contract's (real calls: a headline of 60-100 or 0, some with a compliance scorecard).
//! Deterministic: call `i` is the same in every run.

use serde_json::{Value, json};
use svc_service::db::ScoredCall;

/// How far back the seeded calls reach.
pub(crate) const SPAN_DAYS: i64 = 20;

/// An agent calls are attributed to.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) id: String,
    pub(crate) agency_id: String,
    pub(crate) platform_agent_id: String,
    pub(crate) platform_agency_id: String,
}

const AGENT_LINES: [&str; 8] = [
    "Thanks for calling, this is your licensed agent. Who do I have the pleasure of speaking with today?",
    "Before we go further, this call is recorded for quality and compliance purposes. Is that all right with you?",
    "Can you confirm your date of birth and the ZIP code where you live, so I can check which plans are offered in your area?",
    "Are you enrolled in Medicare Part A and Part B, and do you have any other coverage through an employer or a union?",
    "Which doctors and pharmacies do you want to keep? I will check that they are in network before we look at any plan.",
    "This plan has a zero dollar monthly premium, a 4,500 dollar maximum out of pocket, and includes dental, vision and hearing.",
    "I understand the worry about changing doctors. Let me look up your cardiologist in the provider directory right now.",
    "To enroll, I will read a short statement of understanding and you will answer yes or no to each part of it.",
];

const CUSTOMER_LINES: [&str; 8] = [
    "Hi, yes, I got a letter about my benefits and I had a few questions about the plans for next year.",
    "Sure, that's fine with me.",
    "It's March 4th, 1957, and the ZIP code is 33614.",
    "I have both A and B. I had a supplement through my late husband's union, but that ended in January.",
    "I see Dr. Alvarez for my heart and I use the Walgreens on Fowler Avenue for my prescriptions.",
    "That sounds good, but what would my copay be for a specialist? I see my cardiologist every three months.",
    "Okay. And what about my insulin, is that covered on this plan, and how much would it cost me each month?",
    "Yes, I understand all of that. Let's go ahead with it.",
];

const SUMMARIES: [&str; 3] = [
    "The agent confirmed eligibility and the doctors the customer wants to keep, presented one plan with its premium and out-of-pocket maximum, and enrolled the customer after reading the statement of understanding.",
    "The agent built rapport quickly and checked the provider network, but quoted benefits before confirming the customer's prescriptions; the customer asked to think it over.",
    "A short needs analysis was followed by a clear plan comparison; the agent handled the cost objection with the out-of-pocket maximum and closed with the enrollment statement.",
];

const FEEDBACK: [&str; 3] = [
    "Ask about prescriptions earlier: the insulin question came late and cost two minutes of re-quoting. Keep the recording disclosure as the first thing you say.",
    "Confirm the scope of appointment before discussing specific plans, and summarise the three most important benefits before asking for the decision.",
    "Good pacing and empathy. Slow down while reading the statement of understanding and pause for a clear yes after each part.",
];

/// A fixed pseudo-random number for `i` (splitmix64).
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Call `i` of `count` seeded for `tenant_id`, `now_ms` being the seeding time: even calls
/// are practice, odd ones real; starts evenly spread so that every call ended and was scored
/// at least an hour before `now_ms`.
pub(crate) fn scored(
    tenant_id: &str,
    agents: &[Agent],
    i: usize,
    count: usize,
    now_ms: i64,
) -> ScoredCall {
    let h = mix(i as u64);
    let real = i % 2 == 1;
    let day = 86_400_000_i64;
    let span = SPAN_DAYS * day - 2 * 3_600_000;
    let started_at = now_ms - SPAN_DAYS * day + span * i as i64 / count.max(1) as i64;
    let duration_sec = if real {
        90 + (h % 2_400) as i64
    } else {
        180 + (h % 1_500) as i64
    };
    let agent = &agents[(h >> 8) as usize % agents.len()];
    ScoredCall {
        id: svc_service::ids::call_id(),
        tenant_id: tenant_id.to_owned(),
        source: if real { "real_call" } else { "roleplay" }.into(),
        agent_id: agent.id.clone(),
        agency_id: agent.agency_id.clone(),
        platform_agent_id: Some(agent.platform_agent_id.clone()),
        platform_agency_id: Some(agent.platform_agency_id.clone()),
        drill_key: (!real).then(|| "ma-full-sale".into()),
        started_at,
        duration_sec,
        transcript: transcript(h, real, duration_sec).to_string(),
        score: score(h, real).to_string(),
    }
}

/// A dozen turns, alternating agent and customer; real-call turns carry their times.
fn transcript(h: u64, real: bool, duration_sec: i64) -> Value {
    let turns = 12;
    let offset = (h % 3) as usize;
    let slot = duration_sec as f64 / turns as f64;
    let turns: Vec<Value> = (0..turns)
        .map(|k| {
            let (role, lines) = if k % 2 == 0 {
                ("agent", &AGENT_LINES)
            } else {
                ("customer", &CUSTOMER_LINES)
            };
            let content = lines[(k / 2 + offset) % lines.len()];
            let mut turn = json!({ "role": role, "content": content });
            if real {
                let start = (slot * k as f64 * 10.0).round() / 10.0;
                turn["startTime"] = json!(start);
                turn["endTime"] = json!(((start + slot * 0.9) * 10.0).round() / 10.0);
            }
            turn
        })
        .collect();
    Value::Array(turns)
}

/// A score: practice 40-99; real 60-100, or 0 when no headline could be produced, and a
/// compliance scorecard on a third of them.
fn score(h: u64, real: bool) -> Value {
    let pick = (h >> 16) as usize % SUMMARIES.len();
    let overall = match (real, h % 50) {
        (true, 0) => 0,
        (true, _) => 60 + (h >> 20) % 41,
        (false, _) => 40 + (h >> 20) % 60,
    };
    let mut score = json!({
        "overallScore": overall,
        "summary": SUMMARIES[pick],
        "feedback": FEEDBACK[pick],
        "compliancePercent": 50 + (h >> 28) % 51,
    });
    if real && (h >> 32).is_multiple_of(3) {
        score["complianceScorecard"] = json!({
            "recordingDisclosure": true,
            "scopeOfAppointment": !(h >> 36).is_multiple_of(4),
            "lisDisclosure": true,
            "statementOfUnderstanding": !(h >> 40).is_multiple_of(5),
        });
    }
    score
}

/// `score` after a re-disposition: another headline and compliance figure.
pub(crate) fn redispositioned(score: &str) -> String {
    let mut score: Value = serde_json::from_str(score).expect("a stored score");
    let overall = score["overallScore"].as_i64().unwrap_or(0);
    score["overallScore"] = json!(if overall >= 80 {
        overall - 15
    } else {
        overall.max(60) + 15
    });
    score["compliancePercent"] = json!(100);
    score.to_string()
}
