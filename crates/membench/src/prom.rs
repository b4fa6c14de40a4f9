//! A small parser of the Prometheus text exposition format (version 0.0.4),
//! enough for the daemon's `GET /metrics`: one sample per line,
//! `name{label="value",…} value [timestamp]`; `# HELP` / `# TYPE` comments
//! and blank lines are skipped; values may be `+Inf`, `-Inf` or `NaN`;
//! label values may hold `\\`, `\"` and `\n` escapes.

use std::fmt;

/// One sample line: a metric name (histogram lines keep their `_bucket`,
/// `_sum`, `_count` suffix), its labels in order, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    /// Metric name, e.g. `gitstow_allocated_bytes_total`.
    pub name: String,
    /// Label pairs as written, escapes resolved.
    pub labels: Vec<(String, String)>,
    /// The value (may be infinite or NaN).
    pub value: f64,
}

impl PromSample {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A line that is not a valid sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "metrics line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole exposition; the first bad line is an error.
pub fn parse(text: &str) -> Result<Vec<PromSample>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_line(line).map_err(|reason| ParseError {
            line: i + 1,
            reason,
        })?);
    }
    Ok(out)
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

/// Splits a leading name off `s`.
fn take_name(s: &str) -> Option<(&str, &str)> {
    let end = s
        .char_indices()
        .find(|&(i, c)| !is_name_char(c, i == 0))
        .map_or(s.len(), |(i, _)| i);
    (end > 0).then(|| s.split_at(end))
}

fn parse_line(line: &str) -> Result<PromSample, String> {
    let (name, mut rest) = take_name(line).ok_or("no metric name")?;
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        rest = parse_labels(body, &mut labels)?;
    }
    let mut words = rest.split_whitespace();
    let value = parse_value(words.next().ok_or("no value")?)?;
    if let Some(ts) = words.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("bad timestamp {ts:?}"))?;
    }
    if words.next().is_some() {
        return Err("junk after the timestamp".into());
    }
    Ok(PromSample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Parses `a="x",b="y"}` (after the `{`); returns what follows the `}`.
fn parse_labels<'a>(mut s: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let (key, after) = take_name(s).ok_or("bad label name")?;
        let after = after
            .trim_start()
            .strip_prefix('=')
            .ok_or("no '=' after label name")?;
        let after = after
            .trim_start()
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    Some((_, c)) => {
                        value.push('\\');
                        value.push(c);
                    }
                    None => return Err("unterminated label value".into()),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key.to_owned(), value));
        s = after[end + 1..].trim_start();
        if let Some(next) = s.strip_prefix(',') {
            s = next;
        } else if !s.starts_with('}') {
            return Err("expected ',' or '}' after a label".into());
        }
    }
}

fn parse_value(word: &str) -> Result<f64, String> {
    match word {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => word
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("bad value {word:?}")),
    }
}

/// The value of the first sample named `name` that has no labels, else of
/// the first sample of that name.
pub fn value(samples: &[PromSample], name: &str) -> Option<f64> {
    let mut named = samples.iter().filter(|s| s.name == name);
    let first = named.clone().next()?;
    Some(named.find(|s| s.labels.is_empty()).unwrap_or(first).value)
}

/// The sum of every sample named `name`, whatever its labels (for a
/// counter split by labels); `None` when there is none.
pub fn sum(samples: &[PromSample], name: &str) -> Option<f64> {
    let mut seen = false;
    let total = samples
        .iter()
        .filter(|s| s.name == name)
        .inspect(|_| seen = true)
        .map(|s| s.value)
        .sum();
    seen.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP gitstow_jemalloc_allocated_bytes Bytes allocated by the application.
# TYPE gitstow_jemalloc_allocated_bytes gauge
gitstow_jemalloc_allocated_bytes 1.2345e7
gitstow_pushes_in_flight 0
# TYPE gitstow_allocated_bytes_total counter
gitstow_allocated_bytes_total 987654321

gitstow_store_requests_total{op="put",outcome="ok"} 12
gitstow_store_requests_total{op="get", outcome="error"} 3 1700000000000
gitstow_push_duration_seconds_bucket{le="0.5"} 1
gitstow_push_duration_seconds_bucket{le="+Inf"} 4
gitstow_push_duration_seconds_sum 7.25
gitstow_push_duration_seconds_count 4
weird{path="a\"b\\c\nd",} NaN
neg -Inf
"#;

    #[test]
    fn parses_gauges_counters_labels_and_histograms() {
        let s = parse(TEXT).unwrap();
        assert_eq!(s.len(), 11);
        assert_eq!(
            value(&s, "gitstow_jemalloc_allocated_bytes"),
            Some(12_345_000.0)
        );
        assert_eq!(
            value(&s, "gitstow_allocated_bytes_total"),
            Some(987_654_321.0)
        );
        assert_eq!(value(&s, "gitstow_pushes_in_flight"), Some(0.0));
        assert_eq!(sum(&s, "gitstow_store_requests_total"), Some(15.0));
        let get = s.iter().find(|x| x.label("op") == Some("get")).unwrap();
        assert_eq!(get.label("outcome"), Some("error"));
        assert_eq!(get.value, 3.0);
        let inf = s
            .iter()
            .find(|x| x.name.ends_with("_bucket") && x.label("le") == Some("+Inf"))
            .unwrap();
        assert_eq!(inf.value, 4.0);
        assert_eq!(value(&s, "gitstow_push_duration_seconds_count"), Some(4.0));
        let weird = s.iter().find(|x| x.name == "weird").unwrap();
        assert_eq!(weird.label("path"), Some("a\"b\\c\nd"));
        assert!(weird.value.is_nan());
        assert_eq!(value(&s, "neg"), Some(f64::NEG_INFINITY));
        assert_eq!(value(&s, "absent"), None);
        assert_eq!(sum(&s, "absent"), None);
    }

    #[test]
    fn value_prefers_the_unlabelled_sample() {
        let s = parse("m{a=\"1\"} 5\nm 7\n").unwrap();
        assert_eq!(value(&s, "m"), Some(7.0));
    }

    #[test]
    fn bad_lines_are_errors_with_their_number() {
        for (text, line) in [
            ("ok 1\nnot_a_number abc\n", 2),
            ("m{a=\"x\" 1\n", 1),
            ("m{a=x} 1\n", 1),
            ("m\n", 1),
            ("{a=\"x\"} 1\n", 1),
            ("m 1 2 3\n", 1),
            ("m{a=\"unterminated} 1\n", 1),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.line, line, "{text:?}: {err}");
        }
        // an HTML 404 page is not metrics
        assert!(parse("<html><body>Not Found</body></html>").is_err());
        assert_eq!(parse("").unwrap(), vec![]);
    }
}
