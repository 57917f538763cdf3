//! Body shapes: two bodies have the same shape when their objects have the same keys, their
//! arrays the same length and their values the same kind (string, number, boolean, object,
//! array) at every path. `null` matches any kind: the same nullable field may be set on one
//! side and not on the other (`audioUrl`, `externalUserId`).

use serde_json::Value;

/// Every path where `fixture` and `service` differ in shape, as text.
pub(crate) fn differences(fixture: &Value, service: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("$", fixture, service, &mut out);
    out
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().filter(|k| !y.contains_key(*k)) {
                out.push(format!("{path}.{key} only on the fixtures"));
            }
            for key in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{path}.{key} only on the service"));
            }
            for (key, value) in x {
                if let Some(other) = y.get(key) {
                    walk(&format!("{path}.{key}"), value, other, out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!(
                    "{path}: {} items on the fixtures, {} on the service",
                    x.len(),
                    y.len()
                ));
            }
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                walk(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ if kind(a) != kind(b) => {
            out.push(format!(
                "{path}: {} on the fixtures, {} on the service",
                kind(a),
                kind(b)
            ));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::differences;

    #[test]
    fn shapes_compare_keys_lengths_and_kinds_with_null_matching_anything() {
        let a = json!({ "data": [{ "id": "a", "audioUrl": "https://x" }], "nextCursor": null });
        let b = json!({ "data": [{ "id": "b", "audioUrl": null }], "nextCursor": "c" });
        assert!(differences(&a, &b).is_empty());
        assert_eq!(
            differences(&json!({ "a": 1 }), &json!({ "a": "1" })).len(),
            1
        );
        assert_eq!(differences(&json!({ "a": 1 }), &json!({ "b": 1 })).len(), 2);
        assert_eq!(differences(&json!([1, 2]), &json!([1])).len(), 1);
    }
}
