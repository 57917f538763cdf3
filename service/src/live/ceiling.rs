//! The two-hour ceiling for calls nobody connected to: a redeemed call whose ticket is never
//! used still ends at the ceiling (and, the rep never having spoken, is not scored). Calls with
//! a connected socket are ended by the socket itself at the same deadline.

use crate::state::AppState;

/// Ends `call_id` at the ceiling if no socket ever connected to it.
pub fn watch_unconnected(state: &AppState, call_id: String) {
    let state = state.clone();
    let mut stopping = state.practice.stopping.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(state.practice.call_ceiling) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        match state
            .db
            .end_unconnected_call(&call_id, state.now_ms())
            .await
        {
            Ok(true) => state.practice.scorer.notify(),
            Ok(false) => {}
            Err(error) => {
                tracing::error!(call_id, error = %error, "could not end an unconnected call at the ceiling")
            }
        }
    });
}
