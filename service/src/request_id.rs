//! Request ids: every response carries `X-Service-Request-Id: req_…`, and every error body
//! is rendered here with the same id as `error.requestId`. Also the fallbacks that answer
//! unknown paths and methods with the envelope, and one access-log line per request
//! (method, path, status, duration; never headers or bodies).

use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorBody};
use crate::ids;

/// The response header naming the request.
pub static REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-service-request-id");

/// The id of the current request (a request extension, for handlers that need it).
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Assigns the request id, renders error envelopes and logs the request.
pub async fn middleware(mut request: Request, next: Next) -> Response {
    let request_id = ids::request_id();
    request
        .extensions_mut()
        .insert(RequestId(request_id.clone()));
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();

    let mut response = next.run(request).await;
    let body = response.extensions_mut().remove::<ErrorBody>();
    if let Some(body) = body.or_else(|| framework_error(&response)) {
        response = render(response, &body, &request_id);
    }
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response
            .headers_mut()
            .insert(REQUEST_ID_HEADER.clone(), value);
    }
    tracing::info!(
        request_id,
        %method,
        path,
        status = response.status().as_u16(),
        elapsed_us = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

/// An envelope for an error response that did not come from [`ApiError`] (a framework
/// rejection we did not wrap): never let a bare 4xx/5xx out.
fn framework_error(response: &Response) -> Option<ErrorBody> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return None;
    }
    let error = match status {
        StatusCode::REQUEST_TIMEOUT => ApiError::invalid(format!(
            "the request was not received and answered within {} s",
            crate::config::REQUEST_TIMEOUT.as_secs()
        )),
        StatusCode::NOT_FOUND => ApiError::RouteNotFound,
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        // The audio link's file server, on a Range outside the file; its Content-Range stays.
        StatusCode::RANGE_NOT_SATISFIABLE => ApiError::RangeNotSatisfiable,
        _ if status.is_server_error() => ApiError::Internal(anyhow::anyhow!("status {status}")),
        _ => ApiError::invalid("the request could not be processed"),
    };
    if let ApiError::Internal(cause) = &error {
        tracing::error!(error = %cause, "unwrapped server error");
    }
    Some(ErrorBody {
        code: error.code(),
        message: error.to_string(),
        details: None,
    })
}

fn render(response: Response, body: &ErrorBody, request_id: &str) -> Response {
    let status = match body.code {
        "INVALID_REQUEST" => StatusCode::BAD_REQUEST,
        "INTERNAL_ERROR" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => response.status(),
    };
    let (mut parts, _) = response.into_parts();
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let bytes = body.envelope(request_id).to_string();
    Response::from_parts(parts, Body::from(bytes))
}

/// Fallback for paths the API does not have: `404 NOT_FOUND` in the envelope.
pub async fn not_found() -> Response {
    ApiError::RouteNotFound.into_response()
}

/// Fallback for methods a path does not accept: `405 METHOD_NOT_ALLOWED` in the envelope.
pub async fn method_not_allowed() -> Response {
    ApiError::MethodNotAllowed.into_response()
}
