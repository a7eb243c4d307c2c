//! Reading a cron expression: the forms accepted, what croner is given,
//! and which field is to blame when croner refuses it.
//!
//! croner parses the fields and finds matching wall times; this file only
//! decides what reaches it. It expands the `@` shorthands itself (croner
//! lacks `@midnight`, and the expansion tells which job kind a shorthand
//! is), always hands croner six fields (seconds first, `0` for the
//! five-field form, no year field), and checks the names in each field:
//! croner replaces `MON` or `JAN` wherever they appear, so `"0 MON * * *"`
//! would otherwise be minute 1. croner's errors do not say which field
//! failed; when it refuses an expression, each field is parsed again alone
//! (the others `*`) and the first that fails is the one reported.

use std::sync::Arc;

use croner::errors::CronError as CronerError;
use croner::parser::{CronParser, Seconds, Year};

use super::error::{CronError, Field, Problem};

/// The `@` shorthands, as five-field expressions (Vixie cron's set).
const SHORTHANDS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A parsed expression.
#[derive(Clone, Debug)]
pub(super) struct Expression {
    /// What croner made of it.
    pub(super) schedule: croner::Cron,
    /// True for an interval job, one whose hour field is `*` or `*/n`: it
    /// runs at both instants of a repeated wall time and not at all at a
    /// skipped one (see the module doc of `cron`).
    pub(super) by_elapsed_time: bool,
}

/// Parses `expr` (see [`Cron::parse`](super::Cron::parse) for the forms).
pub(super) fn parse(expr: &str) -> Result<Expression, CronError> {
    let fail = |problem, source: Option<CronerError>| {
        let source = source.map(|e| Arc::new(e) as Arc<dyn std::error::Error + Send + Sync>);
        CronError::expression(expr, problem, source)
    };
    let mut text = expr.trim();
    if text.is_empty() {
        return Err(fail(Problem::Empty, None));
    }
    if text.starts_with('@') {
        text = SHORTHANDS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
            .map(|(_, fields)| *fields)
            .ok_or_else(|| fail(Problem::Shorthand, None))?;
    }
    let mut fields: Vec<&str> = text.split_whitespace().collect();
    match fields.len() {
        5 => fields.insert(0, "0"),
        6 => {}
        found => return Err(fail(Problem::FieldCount { found }, None)),
    }
    for (&field, text) in Field::ALL.iter().zip(&fields) {
        if let Err(reason) = check(field, text) {
            return Err(fail(field_problem(field, text, reason), None));
        }
    }
    let schedule = parser().parse(&fields.join(" ")).map_err(|whole| {
        match Field::ALL
            .iter()
            .zip(&fields)
            .find_map(|(&field, text)| alone(field, text).err().map(|e| (field, text, e)))
        {
            Some((field, text, e)) => fail(field_problem(field, text, message(&e)), Some(e)),
            None => fail(
                Problem::Expression {
                    reason: message(&whole),
                },
                Some(whole),
            ),
        }
    })?;
    let hour = fields[2];
    Ok(Expression {
        schedule,
        by_elapsed_time: hour == "*" || hour.starts_with("*/"),
    })
}

/// croner's parser for the six-field form: seconds first, no year, the
/// day of the month and the day of the week OR-ed when both are given
/// (Vixie cron's rule), Sunday 0 or 7.
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Disallowed)
        .build()
}

/// Parses `text` as `field` with every other field `*`.
fn alone(field: Field, text: &str) -> Result<croner::Cron, CronerError> {
    let mut probe = ["0", "*", "*", "*", "*", "*"];
    probe[field as usize] = text;
    parser().parse(&probe.join(" "))
}

fn field_problem(field: Field, text: &str, reason: String) -> Problem {
    Problem::Field {
        field,
        text: text.to_owned(),
        reason,
    }
}

/// croner's message without the name of its error variant.
fn message(e: &CronerError) -> String {
    match e {
        CronerError::InvalidPattern(m)
        | CronerError::IllegalCharacters(m)
        | CronerError::ComponentError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// What croner lets through: an empty element of a list (`"1,,2"`, which
/// croner reads as `"1,2"`, and `","`, which matches nothing), and names
/// (runs of letters) out of place: month names belong in the month field,
/// day names in the day-of-week field, croner's `L` and `W` in the day
/// fields.
fn check(field: Field, text: &str) -> Result<(), String> {
    if text.split(',').any(str::is_empty) {
        return Err("A list has an empty element.".to_owned());
    }
    for word in text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
    {
        let upper = word.to_ascii_uppercase();
        let ok = match field {
            Field::Second | Field::Minute | Field::Hour => false,
            Field::DayOfMonth => upper.chars().all(|c| c == 'L' || c == 'W'),
            Field::Month => MONTHS.contains(&upper.as_str()),
            Field::DayOfWeek => upper == "L" || DAYS.contains(&upper.as_str()),
        };
        if !ok {
            return Err(match field {
                Field::Month => format!("{word:?} is not a month name."),
                Field::DayOfWeek => format!("{word:?} is not a day name."),
                _ => format!("{word:?} is not a number."),
            });
        }
    }
    Ok(())
}
