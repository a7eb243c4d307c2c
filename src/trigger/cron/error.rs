//! [`CronError`]: why an expression or a time zone was refused, and
//! where.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// A field of a cron expression, in the order of the six-field form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Field {
    /// The six fields, seconds first.
    pub(super) const ALL: [Field; 6] = [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
    ];

    /// Its name, as [`CronError::field`] returns it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    /// What it takes, for the message.
    fn takes(self) -> &'static str {
        match self {
            Field::Second => "Seconds are 0-59",
            Field::Minute => "Minutes are 0-59",
            Field::Hour => "Hours are 0-23",
            Field::DayOfMonth => "Days of the month are 1-31, or L, or nW",
            Field::Month => "Months are 1-12 or JAN-DEC",
            Field::DayOfWeek => {
                "Days of the week are 0-7 (0 and 7 are Sunday) or SUN-SAT, with L or #n"
            }
        }
    }
}

/// What was wrong.
#[derive(Clone, Debug)]
pub(super) enum Problem {
    /// Nothing but white space.
    Empty,
    /// Neither five fields nor six.
    FieldCount { found: usize },
    /// `@something` that is not a shorthand.
    Shorthand,
    /// One field is malformed.
    Field {
        field: Field,
        text: String,
        reason: String,
    },
    /// The parser refused the expression, and no field alone is malformed.
    Expression { reason: String },
    /// The time zone database has no zone of that name.
    TimeZone { reason: String },
}

/// A cron expression or a time zone that [`Cron`](super::Cron) refused.
///
/// Its message says what was given, which field was malformed and why;
/// [`field`](Self::field) names the field for a program, and
/// [`source`](Error::source) is the parser's or the time zone database's
/// own error where there is one.
///
/// ```
/// use chronopool::trigger::Cron;
///
/// let err = Cron::parse("0 61 * * *").unwrap_err(); // minute 0, hour 61
/// assert_eq!(err.field(), Some("hour"));
/// assert!(err.to_string().contains(r#"the hour field "61""#), "{err}");
///
/// let err = Cron::parse("0 9 * * *")?.in_time_zone("Mars/Olympus_Mons").unwrap_err();
/// assert!(err.is_time_zone());
/// assert!(err.to_string().contains("Mars/Olympus_Mons"), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct CronError {
    /// The expression or the zone name, as given.
    given: String,
    problem: Problem,
    source: Option<Arc<dyn Error + Send + Sync>>,
}

impl CronError {
    pub(super) fn expression(
        given: &str,
        problem: Problem,
        source: Option<Arc<dyn Error + Send + Sync>>,
    ) -> Self {
        CronError {
            given: given.to_owned(),
            problem,
            source,
        }
    }

    pub(super) fn time_zone(name: &str, source: jiff::Error) -> Self {
        CronError {
            given: name.to_owned(),
            problem: Problem::TimeZone {
                reason: source.to_string(),
            },
            source: Some(Arc::new(source)),
        }
    }

    /// The malformed field, if one is: `"second"`, `"minute"`, `"hour"`,
    /// `"day-of-month"`, `"month"` or `"day-of-week"`. `None` for an
    /// expression with the wrong number of fields, an unknown `@`
    /// shorthand, or an unknown time zone.
    ///
    /// ```
    /// use chronopool::trigger::Cron;
    ///
    /// assert_eq!(Cron::parse("0 0 * JAN-FOO *").unwrap_err().field(), Some("month"));
    /// assert_eq!(Cron::parse("*/0 * * * * *").unwrap_err().field(), Some("second"));
    /// assert_eq!(Cron::parse("0 0 * *").unwrap_err().field(), None);
    /// ```
    pub fn field(&self) -> Option<&'static str> {
        match self.problem {
            Problem::Field { field, .. } => Some(field.name()),
            _ => None,
        }
    }

    /// True if the error is an unknown time zone (from
    /// [`Cron::in_time_zone`](super::Cron::in_time_zone)) rather than a
    /// malformed expression.
    ///
    /// ```
    /// use chronopool::trigger::Cron;
    ///
    /// assert!(Cron::parse("@daily")?.in_time_zone("Europe/Atlantis").unwrap_err().is_time_zone());
    /// assert!(!Cron::parse("@dayly").unwrap_err().is_time_zone());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_time_zone(&self) -> bool {
        matches!(self.problem, Problem::TimeZone { .. })
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let given = &self.given;
        match &self.problem {
            Problem::Empty => write!(f, "empty cron expression"),
            Problem::FieldCount { found } => write!(
                f,
                "cron expression {given:?} has {found} field{s}; expected 5 (minute hour \
                 day-of-month month day-of-week) or 6 (second minute hour day-of-month \
                 month day-of-week)",
                s = if *found == 1 { "" } else { "s" },
            ),
            Problem::Shorthand => write!(
                f,
                "unknown cron shorthand {given:?}; expected @yearly, @annually, @monthly, \
                 @weekly, @daily, @midnight or @hourly"
            ),
            Problem::Field {
                field,
                text,
                reason,
            } => write!(
                f,
                "cron expression {given:?}: the {name} field {text:?} is malformed: \
                 {reason} ({takes}.)",
                name = field.name(),
                takes = field.takes(),
            ),
            Problem::Expression { reason } => {
                write!(f, "cron expression {given:?} is malformed: {reason}")
            }
            Problem::TimeZone { reason } => write!(f, "unknown time zone {given:?}: {reason}"),
        }
    }
}

impl Error for CronError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn Error + 'static))
    }
}
