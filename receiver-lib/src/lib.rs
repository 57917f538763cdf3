//! Receive `call.scored` webhooks from the Roleplay and Call-Scoring Service: signature
//! verification, deduplication on `X-Service-Webhook-Id`, typed events and axum integration.
