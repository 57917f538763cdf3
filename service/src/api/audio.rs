//! `GET /v1/audio/{callId}?exp=…&sig=…`: a real call's archived recording, behind the signed
//! link its detail hands out ([`crate::realcall::audio`]). The link is the credential: no API
//! key, no tenant check beyond the signature, which names the call. An expired, tampered or
//! other call's link is `403 AUDIO_LINK_INVALID` (this service's own code: the contract
//! leaves the archive's links opaque); a call with no archive left is `404 CALL_NOT_FOUND`.
//! One byte `Range` is answered with `206` (browsers seek in audio); what else RFC 9110 says
//! to ignore (several ranges, another unit, a non-matching `If-Range`) gets the whole file
//! (`range`).

use axum::Router;
use axum::body::Body;
use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use tower::ServiceExt;
use tower_http::services::ServeFile;
use utoipa::{IntoParams, OpenApi};

use crate::envelope::ErrorEnvelope;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::realcall::audio::{audio_type, is_archive_name};
use crate::state::AppState;

mod range;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/audio/{call_id}", get(audio))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(paths(audio))]
pub struct AudioApi;

/// The signed part of an audio link.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AudioQuery {
    /// When the link expires (unix seconds).
    #[param(value_type = i64)]
    pub exp: Option<String>,
    /// The link's signature (hex).
    pub sig: Option<String>,
}

/// A real call's archived recording, from the `audioUrl` of its detail.
#[utoipa::path(
    get,
    path = "/audio/{callId}",
    tag = "calls",
    params(("callId" = String, Path, description = "Public call id"), AudioQuery),
    responses(
        (status = 200, description = "The recording (audio/*); one byte `Range` gets 206, several ranges, another unit or a non-matching `If-Range` the whole file", content_type = "audio/wav"),
        (status = 206, description = "The requested range of the recording"),
        (status = 416, description = "RANGE_NOT_SATISFIABLE: a range outside the recording (with Content-Range: bytes */<length>)", body = ErrorEnvelope),
        (status = 403, description = "AUDIO_LINK_INVALID: expired, tampered with, or for another call", body = ErrorEnvelope),
        (status = 404, description = "CALL_NOT_FOUND: no archived recording (none, or past its 30-day retention)", body = ErrorEnvelope),
    )
)]
async fn audio(
    State(state): State<AppState>,
    ApiPath(call_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<AudioQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let exp = query
        .exp
        .as_deref()
        .and_then(|exp| exp.parse::<i64>().ok())
        .ok_or_else(|| ApiError::AudioLinkInvalid("the audio link has no valid exp".into()))?;
    let sig = query.sig.unwrap_or_default();
    if !state.audio_links.verify(&call_id, exp, &sig) {
        return Err(ApiError::AudioLinkInvalid(
            "the audio link's signature does not match".into(),
        ));
    }
    if state.clock.now().timestamp() > exp {
        return Err(ApiError::AudioLinkInvalid(
            "the audio link has expired; read the call again for a fresh one".into(),
        ));
    }
    let file = state
        .db
        .audio_file(&call_id)
        .await?
        .filter(|name| is_archive_name(name))
        .ok_or(ApiError::CallNotFound)?;
    if !state.archive.holds(&file) {
        return Err(ApiError::CallNotFound);
    }
    // The file server is handed only a Range RFC 9110 says to honour (see `range`).
    let mut request = request;
    range::settle(&mut request, &state.archive.path(&file)).await;
    let path = state.archive.path(&file);
    let mut served = ServeFile::new(&path)
        .oneshot(request)
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map(Body::new)
        .into_response();
    if served.status().is_success() {
        protect(served.headers_mut(), &call_id, &path);
    }
    Ok(served)
}

/// Headers that keep a recording a recording on the API's origin: its audio type (never a
/// guess from elsewhere), no sniffing, a policy under which nothing in it can run, and a
/// download name (an `<audio>` element still plays it).
fn protect(headers: &mut HeaderMap, call_id: &str, path: &Path) {
    // Only archive names with an audio type get here; octet-stream is never rendered anyway.
    let content_type = audio_type(path).unwrap_or("application/octet-stream");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("bin");
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    // Call ids are the service's own (svc_call_ and alphanumerics); anything else is left out.
    let name = if call_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        format!("attachment; filename=\"{call_id}.{ext}\"")
    } else {
        format!("attachment; filename=\"recording.{ext}\"")
    };
    if let Ok(value) = HeaderValue::from_str(&name) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
}
