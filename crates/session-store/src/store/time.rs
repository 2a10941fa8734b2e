//! The store's clock and how it writes and reads timestamps (RFC 3339, UTC, microseconds).

use chrono::{DateTime, SecondsFormat, Utc};

/// The store's clock, for tools that need `now` (export at this moment, backup names) but
/// may not read the clock themselves (`clippy.toml`).
pub fn clock() -> DateTime<Utc> {
    now()
}

/// The store's clock; history logic never reads it (it takes `now` as a parameter).
#[allow(clippy::disallowed_methods)]
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now()
}

/// Timestamps are stored as RFC 3339 in UTC with microseconds, e.g. `2026-11-25T21:42:30.123456Z`.
pub(crate) fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Parses a stored timestamp: RFC 3339 (or its form with a year of more than four digits or
/// a sign, which earlier versions wrote for such years), or a time without offset, read as
/// UTC: SQLite's own `YYYY-MM-DD HH:MM:SS[.fff]` (what `datetime('now')` writes in a
/// hand-made row) or ISO 8601's `YYYY-MM-DDTHH:MM:SS[.ffffff]` (what Python's
/// `datetime.utcnow().isoformat()` writes).
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.with_timezone(&Utc));
    }
    // What `format_time` wrote for a year outside 0 to 9999 (`+10000-01-01T...`), which
    // RFC 3339 cannot write: refused since (`model::keepable_time`), read back as written.
    if let Ok(time) = text.parse::<DateTime<Utc>>() {
        return Some(time);
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_times_parse_back_exactly() {
        let now = now();
        let text = format_time(now);
        assert!(text.ends_with('Z'));
        let back = parse_time(&text).expect("parses");
        assert_eq!(back.timestamp_micros(), now.timestamp_micros());
        assert!(parse_time("2026-01-02 03:04:05").is_some());
        assert!(parse_time("yesterday").is_none());
    }

    /// A time outside the years 0 to 9999 that an earlier version stored (refused now) reads
    /// back as the time it was: the row is not corrupt, nor its session unreadable.
    #[test]
    fn a_stored_time_beyond_four_digit_years_reads_back() {
        for year in [10_000, 200_000, -1, -5_000] {
            let time = chrono::TimeZone::with_ymd_and_hms(&Utc, year, 3, 4, 5, 6, 7)
                .single()
                .expect("a time");
            let text = format_time(time);
            assert_eq!(parse_time(&text), Some(time), "{text}");
        }
    }

    #[test]
    fn times_without_offset_from_other_writers_parse_as_utc() {
        let expected = parse_time("2026-01-02T03:04:05.123456Z");
        assert!(expected.is_some());
        assert_eq!(parse_time("2026-01-02T03:04:05.123456"), expected);
        assert_eq!(parse_time("2026-01-02 03:04:05.123456"), expected);
    }
}
