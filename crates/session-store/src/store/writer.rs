//! Who writes an open (streaming) message, and whether that writer is still there.
//!
//! A handle ([`super::stream::OpenMessage`]) stores a token in `messages.writer`:
//! `host|pid|start|n`, where `start` is the process's start time as the kernel counts it
//! (so a pid the system reused is told apart) and `n` numbers the handles of one process.
//! The next write to the session asks [`is_gone`]:
//! - a handle of this process is gone when it is no longer registered (dropped);
//! - a process of this host is gone when `/proc/PID/stat` is missing, names another start
//!   time, or says the process is a zombie (killed, not yet reaped);
//! - a writer on another host cannot be asked: it holds a lease. It counts as present
//!   while it was heard from within [`crate::repair::WRITER_LEASE`] (ten minutes; `store-repair
//!   --writer-lease` sets another), and as gone once silent for longer. It is heard from at
//!   `begin_message`, at every `push` and at `keep_alive`, each of which sets the session's
//!   `updated_at` (no other write lands on a session while its message is open, so that
//!   column is the writer's last word). Clocks of the hosts are assumed to agree to well
//!   within the lease; a writer silent for longer (a model thinking for minutes without a
//!   part) calls `keep_alive`, or finds its message interrupted (`Error::MessageNotOpen`).

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, Utc};

use crate::history::rules::CheckOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The handles of this process that are still open.
fn live() -> &'static Mutex<HashSet<String>> {
    static LIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(HashSet::new()))
}

/// `host|pid|start` of this process.
fn this_process() -> &'static str {
    static ME: OnceLock<String> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        let start = start_time(pid).map_or_else(|| "?".to_owned(), |(start, _)| start);
        format!("{}|{pid}|{start}", host())
    })
}

/// This machine's name, as the kernel has it (empty when it cannot be read).
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// A new token for a handle of this process, registered as live until [`release`].
pub(crate) fn register() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let token = format!(
        "{}|{}",
        this_process(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    if let Ok(mut live) = live().lock() {
        live.insert(token.clone());
    }
    token
}

/// The handle is done (finished or dropped): from now on it counts as gone.
pub(crate) fn release(token: &str) {
    if let Ok(mut live) = live().lock() {
        live.remove(token);
    }
}

/// When a writer on another host counts as gone: the time it is judged at and how long it
/// may have been silent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lease {
    /// The time of the judgement.
    pub(crate) now: DateTime<Utc>,
    /// How long a writer on another host may stay silent.
    pub(crate) limit: TimeDelta,
}

impl Lease {
    /// The lease a write judges by: now, and the documented limit.
    pub(crate) fn standard() -> Self {
        Self::of(&CheckOptions::at(super::time::now()))
    }

    /// The lease of a check or mend.
    pub(crate) fn of(options: &CheckOptions) -> Self {
        Self {
            now: options.now,
            limit: options.writer_lease,
        }
    }

    /// True when a writer last heard from at `heard` (unknown: `None`) has been silent for
    /// longer than the limit. A time that cannot be read never expires a lease.
    fn expired(&self, heard: Option<DateTime<Utc>>) -> bool {
        heard.is_some_and(|heard| self.now.signed_duration_since(heard) > self.limit)
    }
}

/// Whether the writer named by `token` (a `messages.writer` value), last heard from at
/// `heard`, went away; a token that is missing or not ours to read counts as gone when it
/// names no process at all, one of another host when its lease expired.
pub(crate) fn is_gone(token: Option<&str>, heard: Option<DateTime<Utc>>, lease: &Lease) -> bool {
    let Some(token) = token else {
        return true;
    };
    let mut fields = token.rsplitn(2, '|');
    let (Some(_handle), Some(process)) = (fields.next(), fields.next()) else {
        return true;
    };
    if process == this_process() {
        return live().lock().map_or(true, |live| !live.contains(token));
    }
    let mut parts = process.split('|');
    let (Some(host_name), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    if host_name != host() {
        return lease.expired(heard);
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return true;
    };
    match start_time(pid) {
        Some((now_start, state)) => now_start != start || state == 'Z' || state == 'X',
        // No such process here; where there is no `/proc` to ask, assume it is still there.
        None => cfg!(target_os = "linux"),
    }
}

/// A process's start time (field 22 of `/proc/PID/stat`) and state letter, when it runs.
fn start_time(pid: u32) -> Option<(String, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: read after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((fields.get(19)?.to_string(), state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::standard()
    }

    #[test]
    fn a_registered_handle_is_present_until_released() {
        let token = register();
        assert!(!is_gone(Some(&token), None, &lease()));
        release(&token);
        assert!(is_gone(Some(&token), None, &lease()));
    }

    #[test]
    fn a_writer_on_another_host_is_present_until_its_lease_runs_out() {
        let lease = lease();
        let remote = Some("another-host-entirely|1|1|1");
        let minutes = |m: i64| Some(lease.now - TimeDelta::minutes(m));
        // (silent for, gone): within the lease, at its edge, past it, unknown, in the future.
        for (heard, gone) in [
            (minutes(0), false),
            (minutes(9), false),
            (minutes(10), false),
            (minutes(11), true),
            (minutes(60 * 24), true),
            (None, false),
            (minutes(-5), false),
        ] {
            assert_eq!(is_gone(remote, heard, &lease), gone, "{heard:?}");
        }
        // A handle of this process is judged by its registration, never by its lease.
        let token = register();
        assert!(!is_gone(Some(&token), minutes(60), &lease));
        release(&token);
    }

    #[test]
    fn tokens_that_name_no_live_process_are_gone() {
        for token in [
            None,
            Some(""),
            Some("garbage"),
            Some(&*format!("{}|999999999|1|1", host())),
            Some(&*format!("{}|1|not-a-start-time|1", host())),
        ] {
            if cfg!(target_os = "linux") {
                assert!(is_gone(token, None, &lease()), "{token:?}");
            }
        }
        assert!(!is_gone(
            Some("another-host-entirely|1|1|1"),
            None,
            &lease()
        ));
    }
}
