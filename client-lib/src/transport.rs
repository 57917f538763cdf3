//! One HTTP exchange with the service, repeated under the retry policy: builds the request, sends
//! it with the right bearer credential, and turns the response into a typed value or an error.
//! A redirect is an error (never followed), and a body is read up to the client's limit only.

use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Client;
use super::error::{ApiError, ClientError};
use super::retry::parse_retry_after;

/// Which bearer credential a request carries.
pub(super) enum Auth {
    ApiKey,
    Token(String),
}

/// A request to make: method, path segments under the base URL, query, body, credential.
pub(super) struct Call {
    method: Method,
    segments: Vec<String>,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
    auth: Auth,
    idempotent: bool,
}

impl Call {
    pub(super) fn get(segments: &[&str], query: Vec<(&'static str, String)>) -> Self {
        let segments = segments.iter().map(|s| (*s).to_owned()).collect();
        Self {
            method: Method::GET,
            segments,
            query,
            body: None,
            auth: Auth::ApiKey,
            idempotent: true,
        }
    }

    pub(super) fn post(segments: &[&str], body: &impl Serialize) -> Result<Self, ClientError> {
        let body = serde_json::to_value(body).map_err(|e| ClientError::Decode(e.to_string()))?;
        let segments = segments.iter().map(|s| (*s).to_owned()).collect();
        Ok(Self {
            method: Method::POST,
            segments,
            query: Vec::new(),
            body: Some(body),
            auth: Auth::ApiKey,
            idempotent: false,
        })
    }

    pub(super) fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    pub(super) fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }
}

impl Client {
    /// Sends `call`, retrying under the policy; returns the success status and decoded body.
    pub(super) async fn send<T: DeserializeOwned>(
        &self,
        call: Call,
    ) -> Result<(u16, T), ClientError> {
        let (status, bytes) = self.send_bytes(call).await?;
        let value =
            serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))?;
        Ok((status, value))
    }

    /// Sends `call`, retrying under the policy; returns the success status and the raw body.
    pub(super) async fn send_bytes(&self, call: Call) -> Result<(u16, Vec<u8>), ClientError> {
        let url = self.url(&call.segments)?;
        let bearer = match &call.auth {
            Auth::ApiKey => self
                .api_key
                .as_ref()
                .ok_or(ClientError::MissingApiKey)?
                .expose()
                .to_owned(),
            Auth::Token(token) => token.clone(),
        };
        let mut retry = 0;
        loop {
            let started = std::time::Instant::now();
            let outcome = self.attempt(&call, &url, &bearer).await;
            let status = match &outcome {
                Ok((status, _)) => status.to_string(),
                Err(ClientError::Api(api)) => api.status.to_string(),
                Err(_) => "no response".to_owned(),
            };
            tracing::debug!(method = %call.method, path = url.path(), %status, elapsed = ?started.elapsed(), "request");
            let error = match outcome {
                Ok(success) => return Ok(success),
                Err(error) => error,
            };
            match self.retry.decide(&error, call.idempotent, retry) {
                Some(wait) => {
                    tracing::debug!(method = %call.method, path = url.path(), %error, ?wait, "retrying");
                    (self.retry.sleep)(wait).await;
                    retry += 1;
                }
                None => return Err(error),
            }
        }
    }

    async fn attempt(
        &self,
        call: &Call,
        url: &Url,
        bearer: &str,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut request = self
            .http
            .request(call.method.clone(), url.clone())
            .timeout(self.timeout)
            .header(reqwest::header::USER_AGENT, &self.user_agent)
            .bearer_auth(bearer);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let answered = response.url();
        if (answered.origin(), answered.path()) != (url.origin(), url.path()) {
            // A caller's own HTTP client followed a redirect: the answer is not the service's.
            return Err(ClientError::Redirect {
                status,
                location: Some(response.url().as_str().chars().take(200).collect()),
            });
        }
        if (300..400).contains(&status) {
            return Err(ClientError::Redirect {
                status,
                location: location(response.headers()),
            });
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(date) = header("date")
            .as_deref()
            .and_then(|text| chrono::DateTime::parse_from_rfc2822(text).ok())
        {
            self.service_date
                .store(date.timestamp(), std::sync::atomic::Ordering::Relaxed);
        }
        let request_id = header("x-service-request-id");
        let retry_after = header("retry-after").as_deref().and_then(parse_retry_after);
        let bytes = self.read_body(response).await?;
        if (200..300).contains(&status) {
            Ok((status, bytes))
        } else {
            let error = ApiError::from_parts(status, request_id, retry_after, &bytes);
            Err(ClientError::Api(Box::new(error)))
        }
    }

    /// Reads the body, refusing one longer than the limit: an announced length at once, an
    /// unannounced one (chunked) as soon as it passes the limit, so that what is held never
    /// exceeds it whatever the server sends.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, ClientError> {
        let limit = self.max_body_bytes;
        let too_large = ClientError::BodyTooLarge { limit };
        let announced = response.content_length();
        if announced.is_some_and(|len| len > limit as u64) {
            return Err(too_large);
        }
        let capacity = announced.map_or(0, |len| usize::try_from(len).unwrap_or(limit));
        let mut body = Vec::with_capacity(capacity);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e))?
        {
            if chunk.len() > limit - body.len() {
                return Err(too_large);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport_error(&self, error: &reqwest::Error) -> ClientError {
        if error.is_timeout() {
            ClientError::Timeout(self.timeout)
        } else {
            // reqwest's message names the URL (which holds no secret) and the cause.
            let mut message = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            ClientError::Connect(message)
        }
    }

    fn url(&self, segments: &[String]) -> Result<Url, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| ClientError::BaseUrl {
                url: self.base.to_string(),
                reason: "cannot hold a path",
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }
}

/// A redirect's `Location`, when it is printable text, cut to 200 characters.
fn location(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let value = headers.get(reqwest::header::LOCATION)?.to_str().ok()?;
    Some(value.chars().take(200).collect())
}
