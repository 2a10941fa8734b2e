//! Thinking retention with idle cleanup: which reasoning to keep in the history sent back.
//!
//! Reasoning is kept across turns while a session is active, since the provider's prompt
//! cache holds it anyway. Once the session sat idle longer than the cache lives (default 5
//! minutes) the cache is cold, and old reasoning only costs context: a latch turns on and
//! stays on (until the session's thinking state is cleared), and from then on reasoning is
//! stripped from every assistant message except the most recent `keep_recent` that contain
//! reasoning. Staying on keeps the newly warmed prefix stable. The latest assistant message
//! never loses its reasoning (Anthropic requires it back unchanged), and a message loses all
//! of its reasoning at once, never part of it.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{Message, Part, Role};

/// The default idle threshold: about the lifetime of a provider's prompt cache.
pub const DEFAULT_IDLE_THRESHOLD: Duration = Duration::minutes(5);

/// How reasoning is retained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingConfig {
    /// Idle time after the last completion beyond which the latch turns on.
    pub idle_threshold: Duration,
    /// How many of the most recent assistant messages that contain reasoning keep it once
    /// the latch is on (the latest assistant message always keeps its own).
    pub keep_recent: usize,
}

impl Default for ThinkingConfig {
    fn default() -> Self {
        Self {
            idle_threshold: DEFAULT_IDLE_THRESHOLD,
            keep_recent: 1,
        }
    }
}

/// The persistent part of retention, stored in the session row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingState {
    /// True once the session has been idle past the threshold; stays on until cleared.
    pub latched: bool,
    /// When the last assistant message was completed, if recorded.
    pub last_completion: Option<DateTime<Utc>>,
}

/// What [`plan_retention`] decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// The latch after this decision.
    pub latched: bool,
    /// True when the latch turned on in this decision (the caller persists it).
    pub newly_latched: bool,
    /// The `seq` of every assistant message whose reasoning is stripped, ascending (the
    /// messages arrive in `seq` order).
    pub strip: Vec<i64>,
}

/// Decides what reasoning to strip from `messages` (in `seq` order) at `now`.
///
/// The latch turns on when `now - last_completion > idle_threshold`, where the last
/// completion is the later of `state.last_completion` and the `created_at` of the latest
/// assistant message in `messages` (so a store whose caller never records completions still
/// gets idle cleanup).
pub fn plan_retention(
    messages: &[Message],
    state: &ThinkingState,
    now: DateTime<Utc>,
    config: &ThinkingConfig,
) -> Retention {
    let latest_assistant = messages.iter().rev().find(|m| m.role == Role::Assistant);
    let last_completion = state
        .last_completion
        .max(latest_assistant.map(|m| m.created_at));
    let idle = last_completion.is_some_and(|at| now - at > config.idle_threshold);
    let latched = state.latched || idle;
    let newly_latched = latched && !state.latched;
    if !latched {
        return Retention {
            latched,
            newly_latched,
            strip: Vec::new(),
        };
    }
    let with_reasoning: Vec<&Message> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant && has_reasoning(m))
        .collect();
    let keep_from = with_reasoning.len().saturating_sub(config.keep_recent);
    let latest_seq = latest_assistant.map(|m| m.seq);
    let strip = with_reasoning[..keep_from]
        .iter()
        .map(|m| m.seq)
        .filter(|seq| Some(*seq) != latest_seq)
        .collect();
    Retention {
        latched,
        newly_latched,
        strip,
    }
}

/// True when a message holds reasoning or redacted reasoning.
pub fn has_reasoning(message: &Message) -> bool {
    message.parts.iter().any(is_reasoning)
}

fn is_reasoning(part: &Part) -> bool {
    matches!(
        part,
        Part::Reasoning { .. } | Part::RedactedReasoning { .. }
    )
}

/// `messages` with the reasoning and redacted reasoning parts of every message in
/// `retention.strip` removed. A message left without parts is kept here; the loader drops it.
pub fn apply_retention(messages: &[Message], retention: &Retention) -> Vec<Message> {
    messages
        .iter()
        .map(|message| {
            if retention.strip.binary_search(&message.seq).is_ok() {
                let mut stripped = message.clone();
                stripped.parts.retain(|part| !is_reasoning(part));
                stripped
            } else {
                message.clone()
            }
        })
        .collect()
}
