//! Export: the request body the library would send for a session now, and the thinking
//! retention state kept in the session row (migration V3).
//!
//! The state is three columns of `sessions`: `thinking_latched` (0/1), `last_completion_at`
//! (RFC 3339 or NULL) and `thinking_stripped_through` (V9: the seq the latch last fired at). Completions are recorded explicitly with [`Store::record_completion`]
//! (call it when a model response has been stored); when none was recorded, the `created_at`
//! of the latest assistant message stands in (see `history::thinking::plan_retention`).
//! [`Store::export`] turns the latch on in the row when it decides so; clearing the session's
//! state with [`Store::clear_thinking_state`] turns it off again.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::compaction::provider_history_in;
use super::handle::Store;
use super::sql::{int_at, text_at, values, Sql};
use super::time::now;
use super::time::{format_time, parse_time};
use crate::error::{Error, Result};
use crate::history::render::digests as digests_of;
use crate::history::render::Provider;
use crate::history::request::{build_owned, Inputs, Request};
use crate::history::thinking::{ThinkingConfig, ThinkingState};
use crate::model::{Message, SessionId};

/// How [`Store::export`] builds a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Idle threshold and how many reasoning messages to keep once latched.
    pub thinking: ThinkingConfig,
    /// Write the latch to the session row when it turns on (default). Turn off to export
    /// from a read-only store; the latch then only applies to this export.
    pub persist_latch: bool,
    /// The model the request is for, `provider/model` (PROVIDER_RULES 10c): reasoning
    /// signed by another model is not sent, a message's thinking all at once. `None`: the
    /// model of the session's latest assistant message that has one.
    pub model: Option<String>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            thinking: ThinkingConfig::default(),
            persist_latch: true,
            model: None,
        }
    }
}

const THINKING_STATE: &str = "
    SELECT thinking_latched, last_completion_at, thinking_stripped_through
    FROM sessions WHERE id = ?1";
/// The latch fired: on, and the point it stripped through (migration V9).
const SET_LATCHED: &str =
    "UPDATE sessions SET thinking_latched = 1, thinking_stripped_through = ?2 WHERE id = ?1";
const RECORD_COMPLETION: &str = "UPDATE sessions SET last_completion_at = ?2 WHERE id = ?1";
const CLEAR_THINKING: &str = "
    UPDATE sessions
    SET thinking_latched = 0, last_completion_at = NULL, thinking_stripped_through = NULL
    WHERE id = ?1";

impl Store {
    /// The request body for `session` in `provider`'s format, as it would be sent at `now`.
    ///
    /// Loads the messages the provider sees (not compacted), applies thinking retention
    /// (persisting the latch when it turns on, see [`ExportOptions::persist_latch`]),
    /// sanitizes and renders. The body passes the provider's contract for any stored history.
    pub fn export(
        &self,
        session: &SessionId,
        provider: Provider,
        now: DateTime<Utc>,
        options: &ExportOptions,
    ) -> Result<Value> {
        Ok(self
            .build_export(session, provider, now, options, false)?
            .body)
    }

    /// [`Store::export`] at the store's clock, for tools that do not read a clock themselves.
    pub fn export_now(
        &self,
        session: &SessionId,
        provider: Provider,
        options: &ExportOptions,
    ) -> Result<Value> {
        self.export(session, provider, now(), options)
    }

    /// [`Store::export`] with everything that went into the body: the view and its repairs,
    /// the retention decision, per-message digests and contract violations (empty unless a
    /// renderer has a bug).
    pub fn export_request(
        &self,
        session: &SessionId,
        provider: Provider,
        now: DateTime<Utc>,
        options: &ExportOptions,
    ) -> Result<Request> {
        self.build_export(session, provider, now, options, true)
    }

    /// [`Store::export_request`], with the per-message digests only when `digests` is set.
    fn build_export(
        &self,
        session: &SessionId,
        provider: Provider,
        now: DateTime<Utc>,
        options: &ExportOptions,
        digests: bool,
    ) -> Result<Request> {
        let ((summary, messages), state) = self.read(|db| {
            db.require_session(session)?;
            let history = provider_messages(db, session)?;
            Ok((history, thinking_state(db, session)?))
        })?;
        let inputs = Inputs {
            summary: summary.as_deref(),
            state: &state,
            now,
            config: &options.thinking,
            provider,
            model: options.model.as_deref(),
        };
        // The loaded messages move through the pipeline (no copy of the session); the view
        // and the per-message digests only when the caller asked for them: hashing every
        // rendered message costs about as much as rendering them (issue 16).
        let mut request = build_owned(messages, &inputs, digests);
        if digests {
            request.digests = digests_of(&request.body);
        }
        let fired = request.retention.newly_latched || request.retention.fired_through.is_some();
        if fired && options.persist_latch {
            let through = request.retention.fired_through.or(state.stripped_through);
            self.write(|tx| {
                tx.lock_session(session)?;
                tx.run(SET_LATCHED, &values![session.as_str(), through])
            })?;
        }
        if !request.violations.is_empty() {
            tracing::warn!(
                session = %session,
                provider = %provider,
                violations = request.violations.len(),
                "rendered request breaks the provider contract"
            );
        }
        Ok(request)
    }

    /// The session's thinking retention state (latch and last completion).
    pub fn thinking_state(&self, session: &SessionId) -> Result<ThinkingState> {
        self.nameable(session)?;
        self.read(|db| thinking_state(db, session))
    }

    /// Records that an assistant response was completed at `at` (the idle clock starts here).
    ///
    /// [`Error::TimeOutOfRange`] for a time outside the years 0 to 9999, nothing written.
    pub fn record_completion(&self, session: &SessionId, at: DateTime<Utc>) -> Result<()> {
        if !crate::model::keepable_time(at) {
            return Err(Error::TimeOutOfRange {
                what: "completion time",
                time: at,
            });
        }
        self.write(|tx| {
            tx.lock_session(session)?;
            tx.run(
                RECORD_COMPLETION,
                &values![session.as_str(), format_time(at).as_str()],
            )?;
            Ok(())
        })
    }

    /// Resets the session's thinking state: latch off, no completion recorded. Call it when
    /// the session is cleared.
    pub fn clear_thinking_state(&self, session: &SessionId) -> Result<()> {
        self.write(|tx| {
            tx.lock_session(session)?;
            tx.run(CLEAR_THINKING, &values![session.as_str()])?;
            Ok(())
        })
    }
}

/// What the provider sees: the text of the latest compaction summary, and every message not
/// compacted, in `seq` order.
///
/// SUMMARY: this is the one place where the compaction summary comes from: the latest one
/// stored by `Store::compact`, from the same snapshot as the messages
/// (`Store::provider_history`).
fn provider_messages(
    db: &mut impl Sql,
    session: &SessionId,
) -> Result<(Option<String>, Vec<Message>)> {
    let history = provider_history_in(db, session)?;
    Ok((
        history.summary.map(|summary| summary.text),
        history.messages,
    ))
}

fn thinking_state(db: &mut impl Sql, session: &SessionId) -> Result<ThinkingState> {
    let mut found = None;
    db.each_row(THINKING_STATE, &values![session.as_str()], &mut |row| {
        found = Some((
            int_at(row, 0)?.unwrap_or_default(),
            text_at(row, 1)?,
            int_at(row, 2)?,
        ));
        Ok(())
    })?;
    let (latched, last, stripped_through) =
        found.ok_or_else(|| Error::UnknownSession(session.clone()))?;
    // A timestamp another writer garbled only costs the idle clock, never the export.
    let last_completion = last.as_deref().and_then(parse_time);
    Ok(ThinkingState {
        latched: latched != 0,
        last_completion,
        stripped_through,
    })
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};
    use serde_json::json;

    use super::*;
    use crate::history::contract::check;
    use crate::model::{NewMessage, Part};

    /// A store in a fresh temporary directory (keep the directory alive with it).
    fn temp_store() -> Result<(tempfile::TempDir, Store)> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tempdir".into(),
            source,
        })?;
        let store = Store::open(dir.path().join("s.db"))?;
        Ok((dir, store))
    }

    /// A migrated store whose rows were then written by `sql` on a raw connection, as other
    /// code would write them.
    fn store_with_rows(sql: &str) -> Result<(tempfile::TempDir, Store)> {
        let (dir, store) = temp_store()?;
        drop(store);
        let path = dir.path().join("s.db");
        rusqlite::Connection::open(&path)?.execute_batch(sql)?;
        let store = Store::open(&path)?;
        Ok((dir, store))
    }

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
            .single()
            .unwrap_or_default()
    }

    fn signed(text: &str, signature: &str) -> Part {
        Part::reasoning(text, Some(json!({"anthropic": {"signature": signature}})))
    }

    /// A session with two thinking turns; the second assistant message was completed at
    /// t0 + 3s.
    fn thinking_session(store: &Store) -> Result<SessionId> {
        let session = store.create_session()?;
        store.append_batch(
            &session,
            vec![
                NewMessage::user("a").at(t0()),
                NewMessage::assistant(vec![signed("r1", "s1"), Part::text("1")])
                    .at(t0() + Duration::seconds(1)),
                NewMessage::user("b").at(t0() + Duration::seconds(2)),
                NewMessage::assistant(vec![signed("r2", "s2"), Part::text("2")])
                    .at(t0() + Duration::seconds(3)),
                NewMessage::user("c").at(t0() + Duration::seconds(4)),
            ],
        )?;
        store.record_completion(&session, t0() + Duration::seconds(3))?;
        Ok(session)
    }

    fn thinking_blocks(body: &Value) -> usize {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "thinking")
            .count()
    }

    fn idle() -> DateTime<Utc> {
        t0() + Duration::seconds(3) + Duration::minutes(6)
    }

    #[test]
    fn idle_latch_survives_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tempdir".into(),
            source,
        })?;
        let path = dir.path().join("s.db");
        let session = {
            let store = Store::open(&path)?;
            let session = thinking_session(&store)?;
            assert!(!store.thinking_state(&session)?.latched);
            let body = store.export(
                &session,
                Provider::Anthropic,
                idle(),
                &ExportOptions::default(),
            )?;
            assert_eq!(thinking_blocks(&body), 1, "older reasoning stripped");
            session
        };
        let store = Store::open(&path)?;
        let state = store.thinking_state(&session)?;
        assert!(state.latched);
        assert_eq!(state.last_completion, Some(t0() + Duration::seconds(3)));
        // Active again (not idle), but the latch stays on.
        let body = store.export(
            &session,
            Provider::Anthropic,
            t0() + Duration::seconds(5),
            &ExportOptions::default(),
        )?;
        assert_eq!(thinking_blocks(&body), 1);
        Ok(())
    }

    #[test]
    fn idle_latch_reset() -> Result<()> {
        let (_dir, store) = temp_store()?;
        let session = thinking_session(&store)?;
        store.export(
            &session,
            Provider::Anthropic,
            idle(),
            &ExportOptions::default(),
        )?;
        assert!(store.thinking_state(&session)?.latched);
        store.clear_thinking_state(&session)?;
        assert_eq!(store.thinking_state(&session)?, ThinkingState::default());
        store.record_completion(&session, idle())?;
        let body = store.export(
            &session,
            Provider::Anthropic,
            idle(),
            &ExportOptions::default(),
        )?;
        assert_eq!(
            thinking_blocks(&body),
            2,
            "reasoning kept again after the reset"
        );
        Ok(())
    }

    #[test]
    fn export_without_persisting_leaves_the_row_alone() -> Result<()> {
        let (_dir, store) = temp_store()?;
        let session = thinking_session(&store)?;
        let options = ExportOptions {
            persist_latch: false,
            ..ExportOptions::default()
        };
        let request = store.export_request(&session, Provider::Anthropic, idle(), &options)?;
        assert!(request.retention.newly_latched);
        assert!(!store.thinking_state(&session)?.latched);
        Ok(())
    }

    #[test]
    fn export_skips_compacted_messages_and_passes_the_contract() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tempdir".into(),
            source,
        })?;
        let path = dir.path().join("s.db");
        let store = Store::open(&path)?;
        let session = store.create_session()?;
        store.append(&session, NewMessage::user("old"))?;
        store.append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("a", "bash", json!({}))]),
        )?;
        store.append(
            &session,
            NewMessage::tool(vec![Part::tool_result("a", "ok")]),
        )?;
        store.append(&session, NewMessage::user("new"))?;
        // Older code compacted the turn's first two messages only: the result is an orphan.
        let conn = rusqlite::Connection::open(&path)?;
        conn.execute("UPDATE messages SET compacted = 1 WHERE seq <= 2", [])?;
        for provider in Provider::ALL {
            let body = store.export(&session, provider, t0(), &ExportOptions::default())?;
            assert_eq!(check(provider, &body), vec![], "{provider}: {body:#}");
            assert!(!body.to_string().contains("\"old\""));
        }
        Ok(())
    }

    #[test]
    fn unknown_session_is_refused() -> Result<()> {
        let (_dir, store) = temp_store()?;
        let missing = SessionId::new("missing");
        let export = store.export(&missing, Provider::OpenAi, t0(), &ExportOptions::default());
        assert!(matches!(export, Err(Error::UnknownSession(_))));
        assert!(matches!(
            store.record_completion(&missing, t0()),
            Err(Error::UnknownSession(_))
        ));
        assert!(matches!(
            store.thinking_state(&missing),
            Err(Error::UnknownSession(_))
        ));
        Ok(())
    }

    /// Other code may write `created_at` without an offset (Python's `isoformat()`); the
    /// export reads it as UTC instead of refusing the session.
    #[test]
    fn export_reads_a_created_at_without_offset() -> Result<()> {
        let (_dir, store) = store_with_rows(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES ('x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
             INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES (1, 'x', 0, 0, 'user', '2026-01-01T00:00:00.123456');
             INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, 0, 'text', 'hi');",
        )?;
        let body = store.export(
            &SessionId::new("x"),
            Provider::Anthropic,
            t0(),
            &ExportOptions::default(),
        )?;
        assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
        Ok(())
    }

    /// SQLite stores what a writer hands it: bytes in a TEXT column stay a BLOB, a textual
    /// flag stays TEXT. The export reads them instead of refusing the session.
    #[test]
    fn export_reads_blob_text_and_textual_flags_from_other_writers() -> Result<()> {
        let (_dir, store) = store_with_rows(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES ('x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
             INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
                 (1, 'x', 0, 0, 'user', '2026-01-01T00:00:00Z'),
                 (2, 'x', 1, 0, 'assistant', '2026-01-01T00:00:00Z'),
                 (3, 'x', 2, 0, 'tool', '2026-01-01T00:00:00Z');
             INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, 0, 'text', CAST('hi' AS BLOB));
             INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input) VALUES
                 (2, 0, 'tool_use', 'a', 'bash', CAST('{\"cmd\": \"ls\"}' AS BLOB));
             -- The CHECK on is_error (V1) is not part of the contract: other code's tables lack it.
             PRAGMA ignore_check_constraints = ON;
             INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, is_error) VALUES (3, 0, 'tool_result', '', 'a', 'true');",
        )?;
        let body = store.export(
            &SessionId::new("x"),
            Provider::Anthropic,
            t0(),
            &ExportOptions::default(),
        )?;
        assert_eq!(check(Provider::Anthropic, &body), vec![], "{body:#}");
        assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
        assert_eq!(
            body["messages"][1]["content"][0]["input"],
            json!({"cmd": "ls"})
        );
        assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
        Ok(())
    }

    #[test]
    fn contract_insert_without_the_new_columns_still_works() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: "tempdir".into(),
            source,
        })?;
        let path = dir.path().join("s.db");
        drop(Store::open(&path)?);
        let conn = rusqlite::Connection::open(&path)?;
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES ('x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
            [],
        )?;
        let store = Store::open(&path)?;
        assert_eq!(
            store.thinking_state(&SessionId::new("x"))?,
            ThinkingState::default()
        );
        Ok(())
    }
}
