//! JSON text kept exactly as written.
//!
//! The tool's input (`args.input`) and its answer (`output`) pass through the runner as the
//! text they were written in: key order, number spelling (`1234567890123456789012`, `-0`,
//! `1e400`), string escapes (`"\u00e9"`, `"\/"`) and whitespace inside the value. A parsed
//! value would lose all of these (serde_json's `Value` sorts keys and holds numbers as
//! `f64`), so the runner never parses these values into one: serde_json checks the syntax
//! and keeps the text (`RawValue`), and [`JsonText::check`] walks the structure over
//! borrowed slices of that text for the two rules the runner adds, depth and (for
//! `args.input`) duplicate keys.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::fmt;

/// The deepest nesting of arrays and objects accepted: the limit serde_json's own parser
/// applied when these values were parsed into `Value` (its recursion limit of 128 allows
/// 127 levels), kept so nothing accepted before is refused now, and nothing deeper passes.
pub const MAX_DEPTH: usize = 127;

/// One JSON value as text: no whitespace around it, its inside as written.
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

/// What to do with an object that names a key twice (RFC 8259 allows it, and says the
/// result is unpredictable: some readers keep the first, most the last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateKeys {
    Refuse,
    Keep,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonTextError {
    #[error("it is not exactly one JSON value: {0}")]
    Syntax(String),
    #[error("it nests arrays and objects deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("the object at {at} has the key {key} more than once")]
    DuplicateKey { at: String, key: String },
}

impl JsonText {
    /// One JSON value, with JSON whitespace (space, tab, CR, LF) around it allowed and
    /// dropped; the structure checked by [`JsonText::check`].
    pub fn parse(text: &str, duplicates: DuplicateKeys) -> Result<JsonText, JsonTextError> {
        let raw: &RawValue =
            serde_json::from_str(text).map_err(|e| JsonTextError::Syntax(e.to_string()))?;
        check_raw(raw, duplicates)?;
        Ok(JsonText(raw.to_owned()))
    }

    /// The value's depth is at most [`MAX_DEPTH`] and, with `Refuse`, no object names a
    /// key twice (keys compared after unescaping, so `"a"` and `"\u0061"` are the same).
    pub fn check(&self, duplicates: DuplicateKeys) -> Result<(), JsonTextError> {
        check_raw(&self.0, duplicates)
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The keys of a top-level object, unescaped (a lone surrogate becomes U+FFFD), in
    /// order; `None` when the value is not an object.
    pub fn object_keys(&self) -> Option<Vec<String>> {
        match parse_node(self.as_str()) {
            Ok(Node::Object(members)) => Some(
                members
                    .into_iter()
                    .map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
                    .collect(),
            ),
            _ => None,
        }
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonText({})", self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Equal when the texts are equal: `{"a":1}` and `{ "a": 1 }` differ, as the texts do.
impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for JsonText {}

/// Written out as the text itself.
impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Read as the exact text of the value (syntax checked, structure not: call
/// [`JsonText::check`] on text from outside).
impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(JsonText)
    }
}

fn check_raw(raw: &RawValue, duplicates: DuplicateKeys) -> Result<(), JsonTextError> {
    let mut path = Vec::new();
    walk(raw.get(), 1, duplicates, &mut path)
}

/// One level of the value: its members as slices of the text, walked depth first. Each
/// level re-reads its own slice, so the work is at most the size times [`MAX_DEPTH`].
fn walk(
    text: &str,
    depth: usize,
    duplicates: DuplicateKeys,
    path: &mut Vec<String>,
) -> Result<(), JsonTextError> {
    if !matches!(text.as_bytes().first(), Some(b'{' | b'[')) {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(JsonTextError::TooDeep);
    }
    match parse_node(text).map_err(|e| JsonTextError::Syntax(e.to_string()))? {
        Node::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                path.push(i.to_string());
                walk(item.get(), depth + 1, duplicates, path)?;
                path.pop();
            }
        }
        Node::Object(members) => {
            let mut seen: HashSet<&[u8]> = HashSet::with_capacity(members.len());
            for (key, _) in &members {
                if duplicates == DuplicateKeys::Refuse && !seen.insert(key) {
                    return Err(JsonTextError::DuplicateKey {
                        at: pointer(path),
                        key: shown(key),
                    });
                }
            }
            for (key, value) in members {
                path.push(String::from_utf8_lossy(&key).into_owned());
                walk(value.get(), depth + 1, duplicates, path)?;
                path.pop();
            }
        }
    }
    Ok(())
}

/// Where in the value, as a JSON Pointer (RFC 6901), bounded for a message.
fn pointer(path: &[String]) -> String {
    if path.is_empty() {
        return "the top".into();
    }
    let mut out = String::new();
    for part in path {
        out.push('/');
        out.push_str(&part.replace('~', "~0").replace('/', "~1"));
    }
    shown(out.as_bytes())
}

/// A key or pointer for a message: quoted, escaped, at most 80 characters of it.
fn shown(bytes: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(bytes).chars().take(80).collect();
    format!("{text:?}")
}

/// An array or object one level deep, its members borrowed from the text.
enum Node<'a> {
    Array(Vec<&'a RawValue>),
    Object(Vec<(Vec<u8>, &'a RawValue)>),
}

fn parse_node(text: &str) -> serde_json::Result<Node<'_>> {
    if text.starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text).map(Node::Array)
    } else {
        serde_json::from_str::<Members>(text).map(|m| Node::Object(m.0))
    }
}

struct Members<'a>(Vec<(Vec<u8>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(Key(key)) = map.next_key()? {
                    let value: &'a RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A key as bytes: serde_json unescapes it and keeps a lone surrogate (which RFC 8259's
/// grammar allows and `JSON.stringify` writes) instead of failing on it.
pub(crate) struct Key(pub(crate) Vec<u8>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Key, E> {
                Ok(Key(v.to_vec()))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.as_bytes().to_vec()))
            }
        }
        deserializer.deserialize_bytes(Visit)
    }
}

#[cfg(test)]
mod tests;
