//! Text for people: user strings printed as data (no control character
//! reaches the terminal raw), RFC 3339 times, and aligned tables.

use std::time::SystemTime;

/// True for a character that must not reach a terminal raw: the control
/// characters (newlines, carriage returns, ESC and the other C0 and C1
/// codes, DEL), the Unicode line and paragraph separators, the
/// bidirectional overrides and marks (which can make text read in another
/// order than it is stored), and the characters that print as nothing
/// (zero-width spaces and joiners, the soft hyphen, the byte-order mark,
/// tags), which would make two keys print alike.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{034f}'
                | '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// `s` as data: each unsafe character replaced by its Rust escape (`\n`,
/// `\u{1b}`), and a backslash doubled, so that a hostile key cannot forge
/// lines of the output or send escape sequences to the terminal, and two
/// keys never print alike (a newline prints `\n`, a backslash and an `n`
/// print `\\n`).
pub fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_unsafe(c) || c == '\\' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` in double quotes, every control and unprintable character escaped
/// (Rust's `Debug` of a string), for messages.
pub fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// The first `max` characters of `s`, the last of them `…` if `s` is
/// longer.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `t` in RFC 3339, UTC, to the microsecond (the stores' precision):
/// `2025-01-31T08:00:00.000000Z`.
pub fn rfc3339(t: SystemTime) -> String {
    match jiff::Timestamp::try_from(t) {
        Ok(ts) => format!("{ts:.6}"),
        // Beyond jiff's years -9999 to 9999, which no store holds.
        Err(_) => format!("{t:?}"),
    }
}

/// A table of text, its columns aligned; every cell is [`clean`]ed.
#[derive(Debug)]
pub struct Table {
    /// The header, then the rows.
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the column names `header`.
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// A table without a header (`key  value` lines, say).
    pub fn plain() -> Table {
        Table { rows: Vec::new() }
    }

    /// Adds a row, its cells as data ([`clean`]).
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.rows
            .push(cells.into_iter().map(|c| clean(&c)).collect());
    }

    /// The table, each line after `indent`, the columns two spaces apart.
    pub fn render(&self, indent: &str) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(i))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::from(indent);
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            clean("a\nb\u{1b}[31mc\u{202e}d"),
            "a\\nb\\u{1b}[31mc\\u{202e}d"
        );
        assert_eq!(clean("plain ключ ✓"), "plain ключ ✓");
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("ééé", 3), "ééé");
    }

    #[test]
    fn times_are_rfc3339_with_microseconds() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_000_001);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.000001Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
    }

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(&["KEY", "STATE"]);
        t.row(["a-long-key".to_owned(), "dead".to_owned()]);
        t.row(["k\n".to_owned(), "scheduled".to_owned()]);
        assert_eq!(
            t.render(""),
            "KEY         STATE\na-long-key  dead\nk\\n         scheduled\n"
        );
    }
}
