//! Checks JSON bodies against the response schemas of an OpenAPI 3.1 document, with every object
//! the document describes closed: a missing required property, a wrong type and a property the
//! schema does not declare are all reported, each with the JSON pointer where it happens.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ValidationError};
use serde_json::Value;

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

    /// The value of the top-level property `name` of that body.
    pub(crate) const fn within(self, name: &'static str) -> Self {
        Self {
            within: Some(name),
            ..self
        }
    }
}

impl std::fmt::Display for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(name) = self.within {
            write!(f, "property {name} of ")?;
        }
        write!(f, "{} {} {}", self.method, self.path, self.status)
    }
}

/// An undeclared property that a contract object allows on purpose: `name` on the object at
/// `at`, a JSON pointer in which `*` stands for any one segment (an array index).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenKey {
    pub(crate) at: &'static str,
    pub(crate) name: &'static str,
}

impl OpenKey {
    /// True when this key allows the undeclared property `name` of the object at `at`.
    fn allows(&self, at: &str, name: &str) -> bool {
        if self.name != name {
            return false;
        }
        let pattern: Vec<&str> = self.at.split('/').collect();
        let actual: Vec<&str> = at.split('/').collect();
        pattern.len() == actual.len()
            && pattern
                .iter()
                .zip(&actual)
                .all(|(want, got)| *want == "*" || want == got)
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
    /// Prepares `doc`, an OpenAPI 3.1 document.
    pub(crate) fn new(doc: Value) -> Self {
        let components = doc.get("components").cloned().unwrap_or(Value::Null);
        let mut closed_components = components.clone();
        if let Some(schemas) = closed_components
            .get_mut("schemas")
            .and_then(Value::as_object_mut)
        {
            for schema in schemas.values_mut() {
                close(schema, &components);
            }
        }
        Self {
            doc,
            closed_components,
        }
    }

    /// Problems with `value`, the fixture `fixture`, as the body at `body`: one line each, naming
    /// the fixture and the JSON pointer. Undeclared properties listed in `open` are allowed.
    pub(crate) fn check(
        &self,
        fixture: &str,
        body: Body,
        value: &Value,
        open: &[OpenKey],
    ) -> Vec<String> {
        let schema = match self.schema_of(body) {
            Ok(schema) => schema,
            Err(problem) => return vec![format!("{fixture}: {problem}")],
        };
        let mut root = schema.clone();
        close(
            &mut root,
            self.doc.get("components").unwrap_or(&Value::Null),
        );
        let Some(root_map) = root.as_object_mut() else {
            return vec![format!("{fixture}: the schema of {body} is not an object")];
        };
        root_map.insert("components".into(), self.closed_components.clone());
        let validator = match jsonschema::options()
            .with_draft(Draft::Draft202012)
            .build(&root)
        {
            Ok(validator) => validator,
            Err(e) => {
                return vec![format!(
                    "{fixture}: the schema of {body} does not compile: {e}"
                )];
            }
        };
        let mut problems: Vec<String> = validator
            .iter_errors(value)
            .flat_map(|error| describe(&error, open))
            .map(|(pointer, message)| format!("{fixture} at {pointer}: {message} (as {body})"))
            .collect();
        problems.sort();
        problems
    }

    /// The schema the document declares for `body`.
    fn schema_of(&self, body: Body) -> Result<&Value, String> {
        let pointer = format!(
            "/paths/{}/{}/responses/{}/content/application~1json/schema",
            escape(body.path),
            body.method.to_ascii_lowercase(),
            body.status
        );
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

/// Closes every object `schema` describes: `additionalProperties: false` wherever `properties`
/// are listed and nothing is said about other keys. An object without `properties` (an open map
/// such as `details` or `waveform`) stays open. An `allOf` of plain object schemas (what utoipa
/// writes for `#[serde(flatten)]`) is merged into one object first, so that closing it sees the
/// keys of every part; `components` resolves the parts' `$ref`s.
fn close(schema: &mut Value, components: &Value) {
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
                .for_each(|s| close(s, components)),
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => sub
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(|s| close(s, components)),
            "items" | "additionalProperties" | "not" | "contains" => close(sub, components),
            _ => {}
        }
    }
    let says_already =
        map.contains_key("additionalProperties") || map.contains_key("unevaluatedProperties");
    if map.contains_key("properties") && !says_already {
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
/// undeclared property points at the property itself; an allowed open key is no problem.
fn describe(error: &ValidationError<'_>, open: &[OpenKey]) -> Vec<(String, String)> {
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
            .filter(|name| !open.iter().any(|key| key.allows(&at, name)))
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
