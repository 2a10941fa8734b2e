//! Transcripts for people (`session-store export --format markdown|html`): the rows a
//! transcript shows, read in one snapshot over [`Sql`] (the same code on both engines), and
//! handed to the pure renderers of `history/transcript`.

use super::handle::Store;
use super::rows::Range;
use super::sql::{int_at, text_at, values, Sql};
use super::time::parse_time;
use crate::error::{Error, Result};
use crate::history::compaction::Summary;
use crate::history::transcript::{html, markdown, Transcript};
use crate::model::{Message, SessionId, Usage};

/// The two transcript formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TranscriptFormat {
    /// Markdown: turns, messages, calls with their results, marks in bold.
    Markdown,
    /// One self-contained HTML page: inline CSS, no script, nothing fetched.
    Html,
}

/// What a transcript shows, read in one snapshot.
struct Rows {
    title: Option<String>,
    forked_from: Option<(String, i64)>,
    messages: Vec<Message>,
    summaries: Vec<Summary>,
    usage: Vec<(i64, Usage)>,
}

const SESSION: &str = "SELECT title, parent_id, forked_at_turn FROM sessions WHERE id = ?1";

/// Summaries in use or superseded, but not those a revert set aside.
const SUMMARIES: &str = "
    SELECT id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at
    FROM summaries WHERE session_id = ?1 AND reverted_by IS NULL ORDER BY id";

const USAGE: &str = "
    SELECT m.seq, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
    FROM usage u JOIN messages m ON m.id = u.message_id
    WHERE m.session_id = ?1 ORDER BY m.seq";

/// Every row a transcript of `session` shows.
fn rows_in(sql: &mut impl Sql, session: &SessionId) -> Result<Rows> {
    sql.require_session(session)?;
    let (mut title, mut forked_from) = (None, None);
    sql.each_row(SESSION, &values![session.as_str()], &mut |row| {
        title = text_at(row, 0)?;
        forked_from = text_at(row, 1)?.zip(int_at(row, 2)?);
        Ok(())
    })?;
    let messages = sql.load_messages(session, Range::All)?;
    let mut summaries = Vec::new();
    sql.each_row(SUMMARIES, &values![session.as_str()], &mut |row| {
        let id = int_at(row, 0)?.unwrap_or_default();
        let created = text_at(row, 6)?.unwrap_or_default();
        let created_at = parse_time(&created).ok_or_else(|| Error::CorruptRow {
            table: "summaries",
            row_id: id,
            detail: format!("created_at {created:?} is not RFC 3339"),
        })?;
        summaries.push(Summary {
            id,
            first_turn: int_at(row, 1)?.unwrap_or_default(),
            last_turn: int_at(row, 2)?.unwrap_or_default(),
            compacted_from_turn: int_at(row, 3)?.unwrap_or_default(),
            through_seq: int_at(row, 4)?.unwrap_or_default(),
            text: text_at(row, 5)?.unwrap_or_default(),
            created_at,
        });
        Ok(())
    })?;
    let mut usage = Vec::new();
    let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
    sql.each_row(USAGE, &values![session.as_str()], &mut |row| {
        let seq = int_at(row, 0)?.unwrap_or_default();
        usage.push((
            seq,
            Usage {
                model: text_at(row, 1)?,
                input_tokens: count(int_at(row, 2)?),
                output_tokens: count(int_at(row, 3)?),
                cache_read_tokens: count(int_at(row, 4)?),
                cache_write_tokens: count(int_at(row, 5)?),
            },
        ));
        Ok(())
    })?;
    Ok(Rows {
        title,
        forked_from,
        messages,
        summaries,
        usage,
    })
}

/// The transcript of `session` in `format`.
fn transcript_in(
    sql: &mut impl Sql,
    session: &SessionId,
    format: TranscriptFormat,
) -> Result<String> {
    let rows = rows_in(sql, session)?;
    let transcript = Transcript {
        session,
        title: rows.title.as_deref(),
        forked_from: rows
            .forked_from
            .as_ref()
            .map(|(parent, turn)| (parent.as_str(), *turn)),
        messages: &rows.messages,
        summaries: &rows.summaries,
        usage: &rows.usage,
    };
    Ok(crate::visible::shown(match format {
        TranscriptFormat::Markdown => markdown(&transcript),
        TranscriptFormat::Html => html(&transcript),
    }))
}

impl Store {
    /// The session as a transcript a person reads: Markdown, or one self-contained HTML page
    /// (every stored string escaped, long results folded). Read in one snapshot;
    /// [`Error::UnknownSession`] when the session does not exist.
    pub fn transcript(&self, session: &SessionId, format: TranscriptFormat) -> Result<String> {
        self.read(|db| transcript_in(db, session, format))
    }
}
