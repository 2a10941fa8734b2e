//! PostgreSQL check and mend: the same rules (`check_session`) and plan (`plan_mend`) as
//! `store/repair.rs`. A check reads one snapshot; each session is mended in its own
//! transaction under its row lock, reloaded and re-checked there, and checked once more
//! before the commit. There is no file to back up: `store-repair` refuses `--backup` for a
//! URL (use `pg_dump`).

use super::{lock_session, PgStore};
use crate::error::Result;
use crate::model::SessionId;
use crate::store::now;
use crate::store::repair::{
    check_sessions, mend_session, CheckReport, RepairOptions, SessionRepair,
};

impl PgStore {
    pub(crate) fn check(
        &self,
        sessions: &[SessionId],
        options: &RepairOptions,
    ) -> Result<CheckReport> {
        let options = options.at(now());
        self.read(|tx| check_sessions(tx, sessions, &options))
    }

    /// Mends one session in its own transaction; with `rollback`, does all of it (the same
    /// statements, the same final check) and rolls back: a dry run that writes nothing.
    pub(crate) fn repair_session(
        &self,
        session: &SessionId,
        options: &RepairOptions,
        rollback: bool,
    ) -> Result<SessionRepair> {
        let options = options.at(now());
        self.transaction(rollback, |tx| {
            lock_session(tx, session)?;
            mend_session(tx, session, &options)
        })
    }
}
