//! The PostgreSQL import target: what `store/import.rs`'s import logic asks of a PostgreSQL
//! transaction beyond the engine seam (recording a child session on its call, with the JSON
//! edited in Rust). Everything else an import writes is `store/import.rs`'s, written once.

use super::Tx;
use crate::error::Result;
use serde_json::Value;

use crate::model::SessionId;

/// Records the child session on the call that spawned it (`session_store.child_session` in
/// the call's provider metadata), as SQLite's `json_set` does.
pub(crate) fn link_call(
    tx: &mut Tx<'_>,
    session: &SessionId,
    call: &str,
    child: &SessionId,
) -> Result<()> {
    let rows = tx.query(
        "SELECT p.id, p.provider_metadata FROM parts p
         WHERE p.session_id = $1 AND p.kind = 'tool_use' AND p.tool_use_id = $2",
        &[&session.as_str(), &call],
    )?;
    for row in &rows {
        let part: i64 = row.try_get(0)?;
        let raw: Option<String> = row.try_get(1)?;
        let mut metadata = raw
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(object) = metadata.as_object_mut() {
            let entry = object
                .entry("session_store")
                .or_insert_with(|| Value::Object(Default::default()));
            if !entry.is_object() {
                *entry = Value::Object(Default::default());
            }
            if let Some(inner) = entry.as_object_mut() {
                inner.insert(
                    "child_session".to_owned(),
                    Value::String(child.as_str().to_owned()),
                );
            }
        }
        tx.execute(
            "UPDATE parts SET provider_metadata = $2 WHERE session_id = $3 AND id = $1",
            &[&part, &serde_json::to_string(&metadata)?, &session.as_str()],
        )?;
    }
    Ok(())
}
