//! JSON text passes through as written; only what is not one JSON value, too deep, or (for
//! `args.input`) names a key twice is refused.

use super::*;

fn keep(text: &str) -> Result<JsonText, JsonTextError> {
    JsonText::parse(text, DuplicateKeys::Keep)
}

fn refuse(text: &str) -> Result<JsonText, JsonTextError> {
    JsonText::parse(text, DuplicateKeys::Refuse)
}

/// Values a parsed `Value` would have changed: each comes back as written.
const EXACT: &[&str] = &[
    r#"{"zeta":1,"id":1234567890123456789012,"alpha":1.0000000000000002,"neg":-0}"#,
    r#"{"zeta":2,"id":1234567890123456789012,"alpha":[3,1]}"#,
    "-0",
    "-0.0",
    "1.0000000000000002",
    "1E400",
    "-1e-400",
    "123456789012345678901234567890123456789012345678901234567890",
    "0.1e1",
    r#""\u00e9""#,
    r#""é""#,
    r#""\/""#,
    r#""a\"b\\c\b\f\n\r\t""#,
    r#""\ud800""#,
    r#""\udc00\ud800x""#,
    r#""😀\ud83d\ude00""#,
    r#"{"\ud800":1}"#,
    r#"{ "spaced" : [ 1 , 2 ] ,
  "newline": true }"#,
    "null",
    "true",
    "[]",
    "{}",
    r#"[{"b":1,"a":2},{"a":2,"b":1}]"#,
];

#[test]
fn every_value_keeps_its_exact_text() {
    for text in EXACT {
        assert_eq!(keep(text).expect(text).as_str(), *text);
        assert_eq!(refuse(text).expect(text).as_str(), *text);
    }
}

#[test]
fn json_whitespace_around_the_value_is_dropped_and_inside_kept() {
    let v = keep(" \t\r\n {\"a\" :\n 1}\n\n").expect("one value");
    assert_eq!(v.as_str(), "{\"a\" :\n 1}");
}

#[test]
fn what_is_not_one_json_value_is_refused() {
    for text in [
        "",
        "   ",
        "1 2",
        "{} {}",
        "{",
        "[1,]",
        "{\"a\":1,}",
        "NaN",
        "Infinity",
        "'a'",
        "01",
        "1.",
        ".5",
        "+1",
        "\"\\x41\"",
        "\"\\u12\"",
        "\"a\u{1}b\"",
        "\u{feff}1",
        "\u{a0}1",
        "1\u{a0}",
        "undefined",
        "{a:1}",
    ] {
        assert!(
            matches!(keep(text), Err(JsonTextError::Syntax(_))),
            "{text:?} passed"
        );
    }
}

fn nested_arrays(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_objects(depth: usize) -> String {
    format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth))
}

#[test]
fn depth_is_bounded_where_serde_json_bounded_it() {
    for nested in [nested_arrays, nested_objects] {
        let at = nested(MAX_DEPTH);
        let over = nested(MAX_DEPTH + 1);
        // The limit a `Value` parse had: the same edge.
        assert!(serde_json::from_str::<serde_json::Value>(&at).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&over).is_err());
        assert_eq!(keep(&at).expect("at the limit").as_str(), at);
        assert_eq!(keep(&over).expect_err("over"), JsonTextError::TooDeep);
        assert_eq!(refuse(&over).expect_err("over"), JsonTextError::TooDeep);
    }
    // Mixed, and deep inside a wide value.
    let mixed = format!("{}1{}", "[{\"a\":".repeat(64), "}]".repeat(64));
    assert_eq!(
        keep(&mixed).expect_err("128 levels"),
        JsonTextError::TooDeep
    );
    let wide = format!("[1,2,{{\"x\":[\"s\",{}]}}]", nested_arrays(MAX_DEPTH - 3));
    assert_eq!(keep(&wide).expect("127 levels").as_str(), wide);
    let wide = format!("[1,2,{{\"x\":[\"s\",{}]}}]", nested_arrays(MAX_DEPTH - 2));
    assert_eq!(keep(&wide).expect_err("128 levels"), JsonTextError::TooDeep);
}

#[test]
fn a_very_deep_value_is_refused_without_exhausting_the_stack() {
    assert_eq!(
        keep(&nested_arrays(200_000)).expect_err("deep"),
        JsonTextError::TooDeep
    );
    // Unbalanced: not JSON at all.
    assert!(matches!(
        keep(&"[".repeat(200_000)),
        Err(JsonTextError::Syntax(_))
    ));
}

#[test]
fn duplicate_keys_are_kept_or_refused_as_asked() {
    let dup = r#"{"a":1,"b":2,"a":3}"#;
    assert_eq!(keep(dup).expect("kept").as_str(), dup);
    assert_eq!(
        refuse(dup).expect_err("refused"),
        JsonTextError::DuplicateKey {
            at: "the top".into(),
            key: "\"a\"".into()
        }
    );
    // Compared after unescaping.
    assert!(refuse(r#"{"a":1,"\u0061":2}"#).is_err());
    assert!(refuse(r#"{"\ud800":1,"\ud800":2}"#).is_err());
    assert!(refuse(r#"{"\ud800":1,"\udc00":2}"#).is_ok());
    // Nested, with the place named as a JSON Pointer.
    let err = refuse(r#"{"x":[0,{"a/b":{"k":1,"k":2}}]}"#).expect_err("nested");
    assert_eq!(
        err,
        JsonTextError::DuplicateKey {
            at: "\"/x/1/a~1b\"".into(),
            key: "\"k\"".into()
        }
    );
    assert!(err.to_string().contains("more than once"), "{err}");
    // The same key in two objects is not a duplicate.
    assert!(refuse(r#"[{"a":1},{"a":1}]"#).is_ok());
}

#[test]
fn a_message_never_carries_a_long_or_raw_key() {
    let key = "\u{1b}[31m".to_string() + &"k".repeat(10_000);
    let text = format!("{{{k:?}:1,{k:?}:2}}", k = key);
    let message = refuse(&text).expect_err("dup").to_string();
    assert!(message.len() < 300, "{}", message.len());
    assert!(!message.contains('\u{1b}'), "{message}");
}

#[test]
fn serde_writes_and_reads_the_text_verbatim() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Holder {
        output: JsonText,
    }
    for text in EXACT {
        let h = Holder {
            output: keep(text).expect(text),
        };
        let written = serde_json::to_string(&h).expect("serialize");
        assert_eq!(written, format!("{{\"output\":{text}}}"));
        let back: Holder = serde_json::from_str(&written).expect("deserialize");
        assert_eq!(back, h);
        assert_eq!(back.output.as_str(), *text);
    }
}

#[test]
fn object_keys_in_order() {
    let v = keep(r#"{"zeta":1,"\u0061lpha":2,"zeta":3}"#).expect("object");
    assert_eq!(
        v.object_keys(),
        Some(vec!["zeta".into(), "alpha".into(), "zeta".into()])
    );
    assert_eq!(keep("[1]").expect("array").object_keys(), None);
    assert_eq!(keep("\"{}\"").expect("string").object_keys(), None);
}

#[test]
fn equality_is_of_the_text() {
    assert_eq!(keep("{\"a\":1}").ok(), keep(" {\"a\":1} ").ok());
    assert_ne!(keep("{\"a\":1}").ok(), keep("{\"a\": 1}").ok());
    assert_ne!(keep("1.0").ok(), keep("1").ok());
}
