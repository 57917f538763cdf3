//! REFERENCE.md's tables of `--json` keys, read back so that a test can hold them equal to the
//! keys a command prints (issue 44, item 2: the JSON is for tests, so every key is documented).

use std::collections::BTreeSet;

use serde_json::Value;

/// The keys REFERENCE.md lists for `view` in the table under `heading`: the first column of
/// each row whose second column is `view` or `both`.
pub(crate) fn documented(heading: &str, view: &str) -> BTreeSet<String> {
    let reference = include_str!("../../REFERENCE.md");
    let (_, section) = reference
        .split_once(heading)
        .unwrap_or_else(|| panic!("REFERENCE.md has no {heading:?}"));
    let section = section.split("\n#").next().unwrap_or_default();
    let keys: BTreeSet<String> = section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let key = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let row_view = *cells.get(2)?;
            (row_view == view || row_view == "both").then(|| key.to_owned())
        })
        .collect();
    assert!(!keys.is_empty(), "no keys for {view} under {heading:?}");
    keys
}

/// Every key path of `value`: `a`, `a.b` for an object's keys, `a[].b` for the keys of an
/// array's objects (all elements' keys together).
pub(crate) fn printed(value: &Value) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    collect("", value, &mut keys);
    keys
}

fn collect(prefix: &str, value: &Value, keys: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = format!("{prefix}{key}");
                keys.insert(path.clone());
                match inner {
                    Value::Object(_) => collect(&format!("{path}."), inner, keys),
                    Value::Array(items) => {
                        for item in items.iter().filter(|i| i.is_object()) {
                            collect(&format!("{path}[]."), item, keys);
                        }
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect(prefix, item, keys);
            }
        }
        _ => {}
    }
}

/// Fails unless REFERENCE.md lists exactly the keys `printed` for `view` under `heading`.
pub(crate) fn assert_documented(heading: &str, view: &str, output: &Value) {
    let documented = documented(heading, view);
    let printed = printed(output);
    let undocumented: Vec<&String> = printed.difference(&documented).collect();
    let not_printed: Vec<&String> = documented.difference(&printed).collect();
    assert!(
        undocumented.is_empty() && not_printed.is_empty(),
        "REFERENCE.md's {heading:?} ({view}) is out of step with the output: printed but not \
         listed {undocumented:?}; listed but not printed {not_printed:?}"
    );
}
