//! `prune --older-than DURATION [--dry-run | --yes] [--json]`: delete the sessions nobody touched for
//! that long, each in its own transaction, then give the space back to the file system.

use std::io::Write;

use anyhow::{bail, Context};
use chrono::TimeDelta;
use serde_json::json;
use session_store::clock;
use session_store::Store;

use crate::size::bytes;

/// A span of time such as `30d`, `12h`, `1w2d`, `90m` or `45s`.
pub fn parse_duration(text: &str) -> anyhow::Result<TimeDelta> {
    let mut total = TimeDelta::zero();
    let mut rest = text.trim();
    if rest.is_empty() {
        bail!("empty duration (expected e.g. 30d, 12h, 1w2d)");
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            bail!("{text:?}: expected a number before {rest:?} (e.g. 30d, 12h, 1w2d)");
        }
        let number: i64 = rest[..digits]
            .parse()
            .with_context(|| format!("{text:?}: number too large"))?;
        rest = &rest[digits..];
        let Some(unit) = rest.chars().next() else {
            bail!("{text:?}: no unit after {number} (use s, m, h, d or w, e.g. {number}d)");
        };
        let seconds_per = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => bail!("{text:?}: unknown unit {unit:?} (use s, m, h, d or w)"),
        };
        rest = &rest[unit.len_utf8()..];
        let seconds = number
            .checked_mul(seconds_per)
            .with_context(|| format!("{text:?}: too long"))?;
        let span =
            TimeDelta::try_seconds(seconds).with_context(|| format!("{text:?}: too long"))?;
        total = total
            .checked_add(&span)
            .with_context(|| format!("{text:?}: too long"))?;
    }
    Ok(total)
}

/// What `prune` may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--dry-run`: list, write nothing.
    DryRun,
    /// `--yes`: delete without asking.
    Yes,
    /// Neither: ask on a terminal, refuse without one.
    Ask,
}

impl Mode {
    pub fn of(dry_run: bool, yes: bool) -> Self {
        match (dry_run, yes) {
            (true, _) => Mode::DryRun,
            (false, true) => Mode::Yes,
            (false, false) => Mode::Ask,
        }
    }
}

pub fn run(
    store: &Store,
    older_than: TimeDelta,
    mode: Mode,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let now = clock();
    let cutoff = now
        .checked_sub_signed(older_than)
        .context("the duration reaches before the calendar")?;
    if mode == Mode::Ask && !crate::confirm::delete_sessions(&store.prune_candidates(cutoff)?)? {
        return Ok(());
    }
    let dry_run = mode == Mode::DryRun;
    let spinner = crate::progress::spinner(if dry_run { "listing" } else { "deleting" });
    let sessions = if dry_run {
        store.prune_candidates(cutoff)?
    } else {
        store.prune(cutoff)?
    };
    let reclaimed = if dry_run || sessions.is_empty() {
        None
    } else {
        Some(store.reclaim_space()?)
    };
    spinner.finish_and_clear();
    if json {
        let body = json!({
            "dry_run": dry_run,
            "cutoff": cutoff.to_rfc3339(),
            "sessions": sessions,
            "deleted": if dry_run { 0 } else { sessions.len() },
            "bytes_before": reclaimed.map(|r| r.before_bytes),
            "bytes_after": reclaimed.map(|r| r.after_bytes),
        });
        serde_json::to_writer_pretty(&mut *out, &body)?;
        writeln!(out)?;
        return Ok(());
    }
    let verb = if dry_run { "would delete" } else { "deleted" };
    for session in &sessions {
        writeln!(
            out,
            "{verb} {}\tupdated_at={}\tmessages={}",
            session.session, session.updated_at, session.messages
        )?;
    }
    writeln!(
        out,
        "{verb} {} session(s) last changed before {}",
        sessions.len(),
        cutoff.to_rfc3339()
    )?;
    if let Some(reclaimed) = reclaimed {
        writeln!(
            out,
            "database {} -> {}",
            bytes(reclaimed.before_bytes),
            bytes(reclaimed.after_bytes)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() -> anyhow::Result<()> {
        assert_eq!(parse_duration("30d")?, TimeDelta::days(30));
        assert_eq!(parse_duration("1w2d")?, TimeDelta::days(9));
        assert_eq!(parse_duration("90m")?, TimeDelta::minutes(90));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        Ok(())
    }

    #[test]
    fn a_number_without_a_unit_is_named_as_missing_its_unit() {
        for (text, said) in [
            ("0", "no unit after 0 (use s, m, h, d or w, e.g. 0d)"),
            ("30", "no unit after 30"),
            ("1d12", "no unit after 12"),
            (" 7 ", "no unit after 7"),
            ("5y", "unknown unit 'y'"),
        ] {
            let error = match parse_duration(text) {
                Ok(span) => panic!("{text:?} read as {span}"),
                Err(error) => error.to_string(),
            };
            assert!(error.contains(said), "{text:?}: {error}");
            assert!(!error.contains("' '"), "{text:?}: {error}");
        }
    }
}
