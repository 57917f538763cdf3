//! Checks JSON bodies against the response schemas of an OpenAPI 3.1 document, with every object
//! the document describes closed except the ones the caller names open: a missing required
//! property, a wrong type and a property the schema does not declare are all reported, each with
//! the JSON pointer where it happens. [`served_document`] and [`CONTRACT_OPEN`] are this API's
//! document and its open objects.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ValidationError};
use serde_json::Value;

use crate::Service;

/// The contract's open objects (section 2), named by the component the service's document gives
/// them: a Score "accepts additional keys" and transcript turns "accept extra keys and are read
/// loosely". The document must say so itself; every other object is checked closed.
pub(crate) const CONTRACT_OPEN: &[&str] = &["Score", "TranscriptTurn"];

/// The document `service` serves at `/v1/openapi.json`, fetched as a user would.
pub(crate) async fn served_document(service: &Service) -> Value {
    let response = reqwest::get(format!("{}/openapi.json", service.base_url()))
        .await
        .expect("GET /v1/openapi.json");
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.expect("the document is JSON")
}

/// Where a body lives in the document: the JSON response of `method path` answering `status`,
/// or one property of that response (`within`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Body {
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
    pub(crate) status: u16,
    pub(crate) within: Option<&'static str>,
}

impl Body {
    /// The whole JSON body of `method path` answering `status`.
    pub(crate) const fn of(method: &'static str, path: &'static str, status: u16) -> Self {
        Self {
            method,
            path,
            status,
            within: None,
        }
    }

    /// The body of the webhook `name` (the document's `webhooks` section).
    pub(crate) const fn webhook(name: &'static str) -> Self {
        Self {
            method: WEBHOOK,
            path: name,
            status: 0,
            within: None,
        }
    }

    /// The value of the top-level property `name` of that body.
    pub(crate) const fn within(self, name: &'static str) -> Self {
        Self {
            within: Some(name),
            ..self
        }
    }
}

/// The "method" of a webhook body.
const WEBHOOK: &str = "WEBHOOK";

impl std::fmt::Display for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.method == WEBHOOK {
            return write!(f, "the {} webhook body", self.path);
        }
        if let Some(name) = self.within {
            write!(f, "property {name} of ")?;
        }
        write!(f, "{} {} {}", self.method, self.path, self.status)
    }
}

/// An OpenAPI document prepared for checking bodies against it.
#[derive(Debug)]
pub(crate) struct ApiDoc {
    /// The document as served, to find the schema of a response.
    doc: Value,
    /// `components` with every object closed, to validate against.
    closed_components: Value,
}

impl ApiDoc {
    /// Prepares `doc`, an OpenAPI 3.1 document. The component schemas named in `open` keep what
    /// the document says of keys they do not declare (and are closed where it says nothing);
    /// every other object is closed, whatever the document says.
    pub(crate) fn new(doc: Value, open: &[&str]) -> Self {
        let components = doc.get("components").cloned().unwrap_or(Value::Null);
        let mut closed_components = components.clone();
        if let Some(schemas) = closed_components
            .get_mut("schemas")
            .and_then(Value::as_object_mut)
        {
            for (name, schema) in schemas.iter_mut() {
                let openness = if open.contains(&name.as_str()) {
                    Openness::AsDocumented
                } else {
                    Openness::Closed
                };
                close(schema, &components, openness);
            }
        }
        Self {
            doc,
            closed_components,
        }
    }

    /// Problems with `value`, named `label` (a fixture, a request), as the body at `body`: one
    /// line each, naming `label` and the JSON pointer.
    pub(crate) fn check(&self, label: &str, body: Body, value: &Value) -> Vec<String> {
        let schema = match self.schema_of(body) {
            Ok(schema) => schema,
            Err(problem) => return vec![format!("{label}: {problem}")],
        };
        let mut root = schema.clone();
        close(
            &mut root,
            self.doc.get("components").unwrap_or(&Value::Null),
            Openness::Closed,
        );
        let Some(root_map) = root.as_object_mut() else {
            return vec![format!("{label}: the schema of {body} is not an object")];
        };
        root_map.insert("components".into(), self.closed_components.clone());
        let validator = match jsonschema::options()
            .with_draft(Draft::Draft202012)
            .build(&root)
        {
            Ok(validator) => validator,
            Err(e) => {
                return vec![format!(
                    "{label}: the schema of {body} does not compile: {e}"
                )];
            }
        };
        let mut problems: Vec<String> = validator
            .iter_errors(value)
            .flat_map(|error| describe(&error))
            .map(|(pointer, message)| format!("{label} at {pointer}: {message} (as {body})"))
            .collect();
        problems.sort();
        problems
    }

    /// The schema the document declares for `body`.
    fn schema_of(&self, body: Body) -> Result<&Value, String> {
        let pointer = if body.method == WEBHOOK {
            format!(
                "/webhooks/{}/post/requestBody/content/application~1json/schema",
                escape(body.path)
            )
        } else {
            format!(
                "/paths/{}/{}/responses/{}/content/application~1json/schema",
                escape(body.path),
                body.method.to_ascii_lowercase(),
                body.status
            )
        };
        let schema = self
            .doc
            .pointer(&pointer)
            .ok_or_else(|| format!("the document declares no JSON body for {body}"))?;
        match body.within {
            None => Ok(schema),
            Some(name) => self
                .property(schema, name)
                .ok_or_else(|| format!("the document declares no property {name} for {body}")),
        }
    }

    /// The schema of property `name` in `schema`, following `$ref` and `allOf`.
    fn property<'a>(&'a self, schema: &'a Value, name: &str) -> Option<&'a Value> {
        let schema = match schema.get("$ref").and_then(Value::as_str) {
            Some(target) => self.doc.pointer(target.strip_prefix('#')?)?,
            None => schema,
        };
        if let Some(found) = schema.get("properties").and_then(|p| p.get(name)) {
            return Some(found);
        }
        schema
            .get("allOf")?
            .as_array()?
            .iter()
            .find_map(|part| self.property(part, name))
    }
}

/// What [`close`] does with keys an object does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Openness {
    /// Refused, whatever the document says.
    Closed,
    /// As the document says; refused where it says nothing.
    AsDocumented,
}

/// Closes every object `schema` describes: `additionalProperties: false` wherever `properties`
/// are listed, replacing what the document says unless `openness` (which applies to `schema`
/// itself, not to the objects inside it) keeps it. An object without `properties` (an open map
/// such as `details` or `waveform`) stays open. An `allOf` of plain object schemas (what utoipa
/// writes for `#[serde(flatten)]`) is merged into one object first, so that closing it sees the
/// keys of every part; `components` resolves the parts' `$ref`s.
fn close(schema: &mut Value, components: &Value, openness: Openness) {
    merge_all_of(schema, components);
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    for (keyword, sub) in map.iter_mut() {
        match keyword.as_str() {
            "properties" | "patternProperties" | "$defs" => sub
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
                .for_each(|s| close(s, components, Openness::Closed)),
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => sub
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(|s| close(s, components, Openness::Closed)),
            "items" | "additionalProperties" | "not" | "contains" => {
                close(sub, components, Openness::Closed);
            }
            _ => {}
        }
    }
    if !map.contains_key("properties") {
        return;
    }
    let documented = openness == Openness::AsDocumented
        && (map.contains_key("additionalProperties") || map.contains_key("unevaluatedProperties"));
    if !documented {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
}

/// Keywords of a part that [`merge_all_of`] can merge.
const PLAIN_OBJECT: &[&str] = &["type", "properties", "required", "description", "title"];

/// Replaces `schema`'s `allOf` by the union of its parts' `properties` and `required` when every
/// part is a plain object schema; otherwise leaves it (and closing its parts then shows it).
fn merge_all_of(schema: &mut Value, components: &Value) {
    let Some(parts) = schema.get("allOf").and_then(Value::as_array) else {
        return;
    };
    let mut properties = serde_json::Map::new();
    let mut required: Vec<Value> = Vec::new();
    for part in parts {
        let mut part = match part.get("$ref").and_then(Value::as_str) {
            Some(target) => match target
                .strip_prefix("#/components")
                .and_then(|p| components.pointer(p))
            {
                Some(found) => found.clone(),
                None => return,
            },
            None => part.clone(),
        };
        merge_all_of(&mut part, components);
        let Some(part) = part.as_object() else { return };
        if part.keys().any(|k| !PLAIN_OBJECT.contains(&k.as_str())) {
            return;
        }
        if let Some(listed) = part.get("properties").and_then(Value::as_object) {
            properties.extend(listed.clone());
        }
        for name in part
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !required.contains(name) {
                required.push(name.clone());
            }
        }
    }
    if let Some(map) = schema.as_object_mut() {
        map.remove("allOf");
        map.insert("type".into(), Value::from("object"));
        map.insert("properties".into(), Value::Object(properties));
        map.insert("required".into(), Value::Array(required));
    }
}

/// The problems one validation error stands for, as (JSON pointer, message). A missing or an
/// undeclared property points at the property itself.
fn describe(error: &ValidationError<'_>) -> Vec<(String, String)> {
    let at = error.instance_path().as_str().to_owned();
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            vec![(
                child(&at, &name),
                "required by the schema but missing".into(),
            )]
        }
        ValidationErrorKind::UnevaluatedProperties { unexpected }
        | ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| (child(&at, name), "not declared by the schema".into()))
            .collect(),
        _ => vec![(pointer_or_root(&at), error.to_string())],
    }
}

/// The pointer of property `name` of the object at `at`.
fn child(at: &str, name: &str) -> String {
    format!("{at}/{}", escape(name))
}

fn pointer_or_root(at: &str) -> String {
    if at.is_empty() {
        "(root)".into()
    } else {
        at.to_owned()
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
