//! Thinking retention with idle cleanup: which reasoning to keep in the history sent back.
//!
//! Reasoning is kept across turns while a session is active, since the provider's prompt
//! cache holds it anyway. Once the session sat idle longer than the cache lives (default 5
//! minutes) the cache is cold, and old reasoning only costs context: the latch fires and
//! strips reasoning from every assistant message up to that point except the most recent
//! `keep_recent` that contain reasoning. It strips **once**, when it fires: the point it fired
//! at (`ThinkingState::stripped_through`, the seq of the session's last message then) is kept,
//! and assistant messages after it keep their reasoning, so every later request keeps the one
//! before it as a byte prefix and the newly warmed cache stays valid. The next idle period
//! fires it again and moves the point to the end. The latest assistant message never loses its
//! reasoning (Anthropic requires it back unchanged), and a message loses all of its reasoning
//! at once, never part of it.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::history::blank::is_blank;
use crate::history::signed::is_position_validated;
use crate::model::{Message, Part, Role};

/// The default idle threshold: about the lifetime of a provider's prompt cache.
pub const DEFAULT_IDLE_THRESHOLD: Duration = Duration::minutes(5);

/// How reasoning is retained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingConfig {
    /// Idle time after the last completion beyond which the latch turns on.
    pub idle_threshold: Duration,
    /// How many of the most recent assistant messages that contain reasoning, up to the point
    /// where the latch fired, keep it (the latest assistant message always keeps its own, and
    /// messages after that point keep theirs).
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
    /// The `seq` of the session's last message when the latch last fired: reasoning is
    /// stripped up to here and kept after. `None` when it never fired (a latched state
    /// without it, from before it was kept, fires again at the next decision).
    #[serde(default)]
    pub stripped_through: Option<i64>,
}

/// What [`plan_retention`] decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// The latch after this decision.
    pub latched: bool,
    /// True when the latch turned on in this decision (the caller persists it).
    pub newly_latched: bool,
    /// `Some(seq)` when the latch fired in this decision and the strip point moved to `seq`
    /// (the caller persists it as [`ThinkingState::stripped_through`]).
    #[serde(default)]
    pub fired_through: Option<i64>,
    /// The `seq` of every assistant message whose reasoning is stripped, ascending (the
    /// messages arrive in `seq` order).
    pub strip: Vec<i64>,
}

/// Decides what reasoning to strip from `messages` (in `seq` order) at `now`.
///
/// The session is idle when `now - last_completion > idle_threshold`, where the last
/// completion is the later of `state.last_completion` and the `created_at` of the latest
/// assistant message in `messages` (so a store whose caller never records completions still
/// gets idle cleanup). Idle, the latch fires: it turns on (and stays on) and the strip point
/// moves to the last message. Otherwise the point stays where it fired, so what is stripped
/// never changes between two idle periods and each request keeps the one before it as a
/// prefix. Stripped: the reasoning of every assistant message at or before the point, except
/// the `keep_recent` most recent of those that have reasoning, and never the latest assistant
/// message the provider sees.
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
            fired_through: None,
            strip: Vec::new(),
        };
    }
    // Fires when idle, or once for a latch set before the point was kept.
    let end = messages.last().map(|m| m.seq);
    let fires = idle || state.stripped_through.is_none();
    let through = if fires {
        end.max(state.stripped_through)
    } else {
        state.stripped_through
    };
    let fired_through = through.filter(|_| fires && through != state.stripped_through);
    let Some(through) = through else {
        return Retention {
            latched,
            newly_latched,
            fired_through,
            strip: Vec::new(),
        };
    };
    let with_reasoning: Vec<&Message> = messages
        .iter()
        .take_while(|m| m.seq <= through)
        .filter(|m| m.role == Role::Assistant && has_reasoning(m))
        .collect();
    let keep_from = with_reasoning.len().saturating_sub(config.keep_recent);
    // The latest assistant message the provider sees: one that renders to nothing (blank
    // text, unsigned reasoning) must not leave the one before it unprotected.
    let latest_seq = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && m.parts.iter().any(is_sent))
        .map(|m| m.seq);
    let strip = with_reasoning[..keep_from]
        .iter()
        .map(|m| m.seq)
        .filter(|seq| Some(*seq) != latest_seq)
        .collect();
    Retention {
        latched,
        newly_latched,
        fired_through,
        strip,
    }
}

/// True when a message holds reasoning or redacted reasoning.
pub fn has_reasoning(message: &Message) -> bool {
    message.parts.iter().any(is_reasoning)
}

/// True for a part that reaches the provider from an assistant message: non-blank text, a
/// tool part, or reasoning whose position the provider validates.
fn is_sent(part: &Part) -> bool {
    match part {
        Part::Text { text, .. } => !is_blank(text),
        Part::ToolUse { .. }
        | Part::ToolResult { .. }
        | Part::Image { .. }
        | Part::Document { .. }
        | Part::ServerToolUse { .. }
        | Part::ServerToolResult { .. }
        | Part::Opaque { .. } => true,
        Part::Reasoning { .. } | Part::RedactedReasoning { .. } => is_position_validated(part),
    }
}

fn is_reasoning(part: &Part) -> bool {
    matches!(
        part,
        Part::Reasoning { .. } | Part::RedactedReasoning { .. }
    )
}

/// `messages` with the reasoning and redacted reasoning parts of every message in
/// `retention.strip` removed. A message left without parts is kept here; the loader drops it.
#[cfg(test)]
pub(crate) fn apply_retention(messages: &[Message], retention: &Retention) -> Vec<Message> {
    retained_owned(messages.to_vec(), retention)
}

/// The same as `apply_retention`, over messages the caller gives up: stripped in place, the
/// rest untouched (no copy of the session, whether or not something is stripped).
pub(crate) fn retained_owned(mut messages: Vec<Message>, retention: &Retention) -> Vec<Message> {
    if !retention.strip.is_empty() {
        for message in &mut messages {
            if retention.strip.binary_search(&message.seq).is_ok() {
                message.parts.retain(|part| !is_reasoning(part));
                message
                    .parts
                    .iter_mut()
                    .for_each(crate::history::models::unpair_call_item);
            }
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::*;

    /// user, then three assistant messages with signed reasoning (seq 2, 4, 6) answered by
    /// users, the last one (seq 6) being the latest assistant message; created one second apart.
    fn three_thinking_turns() -> Vec<Message> {
        history(vec![
            user("a"),
            assistant(vec![signed("r1", "anthropic", "s1"), Part::text("1")]),
            user("b"),
            assistant(vec![signed("r2", "anthropic", "s2"), Part::text("2")]),
            user("c"),
            assistant(vec![signed("r3", "anthropic", "s3"), Part::text("3")]),
            user("d"),
        ])
    }

    fn latest_completion(messages: &[Message]) -> DateTime<Utc> {
        messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map_or_else(t0, |m| m.created_at)
    }

    #[test]
    fn idle_latch_off() {
        let messages = three_thinking_turns();
        let now = latest_completion(&messages) + Duration::minutes(5);
        let plan = plan_retention(
            &messages,
            &ThinkingState::default(),
            now,
            &ThinkingConfig::default(),
        );
        assert_eq!(
            plan,
            Retention::default(),
            "exactly at the threshold is not idle"
        );
        assert_eq!(apply_retention(&messages, &plan), messages);
    }

    #[test]
    fn idle_latch_on() {
        let messages = three_thinking_turns();
        let now = latest_completion(&messages) + Duration::minutes(5) + Duration::seconds(1);
        let plan = plan_retention(
            &messages,
            &ThinkingState::default(),
            now,
            &ThinkingConfig::default(),
        );
        assert_eq!(
            plan,
            Retention {
                latched: true,
                newly_latched: true,
                fired_through: Some(7),
                strip: vec![2, 4]
            }
        );
        let kept = apply_retention(&messages, &plan);
        assert_eq!(kept[1].parts, vec![Part::text("1")]);
        assert_eq!(
            kept[5].parts, messages[5].parts,
            "latest keeps its reasoning"
        );
    }

    /// A message whose reasoning the latch strips loses its calls' `fc_` item ids with it
    /// (`models::unpair_call_item`); a message it keeps keeps them.
    #[test]
    fn stripped_reasoning_takes_its_calls_item_ids() {
        let call = Part::ToolUse {
            id: "c".into(),
            name: "f".into(),
            input: serde_json::json!({}),
            provider_metadata: Some(serde_json::json!({"openai": {"id": "fc_1"}})),
        };
        let reasoning = Part::reasoning(
            "r",
            Some(serde_json::json!({"openai": {"id": "rs_1", "encrypted_content": "E"}})),
        );
        let messages = history(vec![
            user("a"),
            assistant(vec![reasoning.clone(), call.clone()]),
            user("b"),
            assistant(vec![reasoning, call.clone()]),
        ]);
        let plan = Retention {
            latched: true,
            newly_latched: false,
            fired_through: None,
            strip: vec![2],
        };
        let kept = apply_retention(&messages, &plan);
        assert_eq!(
            kept[1].parts,
            [Part::tool_use("c", "f", serde_json::json!({}))]
        );
        assert_eq!(kept[3].parts, messages[3].parts);
    }

    #[test]
    fn idle_latch_stays_on_once_latched() {
        let messages = three_thinking_turns();
        let state = ThinkingState {
            latched: true,
            last_completion: Some(latest_completion(&messages)),
            stripped_through: None,
        };
        let plan = plan_retention(
            &messages,
            &state,
            latest_completion(&messages),
            &ThinkingConfig::default(),
        );
        assert!(plan.latched && !plan.newly_latched);
        assert_eq!(plan.strip, vec![2, 4]);
        assert_eq!(
            plan.fired_through,
            Some(7),
            "a latch without a point fires once"
        );
    }

    /// Three more thinking turns after the latch fired at seq 7, none of them idle.
    fn three_more_turns(mut messages: Vec<Message>) -> Vec<Message> {
        let more = history(vec![
            assistant(vec![signed("r4", "anthropic", "s4"), Part::text("4")]),
            user("e"),
            assistant(vec![signed("r5", "anthropic", "s5"), call("x")]),
            tool(vec![Part::tool_result("x", "ok")]),
            assistant(vec![signed("r6", "anthropic", "s6"), Part::text("6")]),
        ]);
        let last = messages.last().map_or(0, |m| m.seq);
        for (i, mut m) in more.into_iter().enumerate() {
            m.seq = last + 1 + i as i64;
            m.created_at = t0() + Duration::seconds(m.seq - 1);
            messages.push(m);
        }
        messages
    }

    /// The regression of issue 16: once the latch is on, each new assistant message with
    /// reasoning used to strip the previous one's (`keep_recent = 1`), so every request broke
    /// the cached prefix. After the latch fired, what is stripped stays put.
    #[test]
    fn latch_strips_once_and_keeps_the_prefix_stable_after() {
        let base = three_thinking_turns();
        let fired = ThinkingState {
            latched: true,
            last_completion: Some(latest_completion(&base)),
            stripped_through: Some(7),
        };
        let config = ThinkingConfig::default();
        let grown = three_more_turns(base.clone());
        let mut previous: Option<Vec<Message>> = None;
        for messages in [&base, &grown] {
            let now = latest_completion(messages) + Duration::seconds(1);
            let plan = plan_retention(messages, &fired, now, &config);
            assert_eq!(plan.strip, vec![2, 4], "only what the latch stripped");
            assert_eq!(plan.fired_through, None, "not idle: it does not fire again");
            let kept = apply_retention(messages, &plan);
            if let Some(previous) = &previous {
                assert_eq!(&kept[..previous.len()], &previous[..], "prefix kept");
            }
            previous = Some(kept);
        }
        // A new idle period fires again and moves the point to the end.
        let idle = latest_completion(&grown) + Duration::minutes(6);
        let plan = plan_retention(&grown, &fired, idle, &config);
        assert_eq!(plan.fired_through, Some(12));
        assert_eq!(plan.strip, vec![2, 4, 6, 8, 10]);
    }

    #[test]
    fn recorded_completion_later_than_the_messages_counts() {
        let messages = three_thinking_turns();
        let recorded = latest_completion(&messages) + Duration::minutes(10);
        let state = ThinkingState {
            latched: false,
            last_completion: Some(recorded),
            stripped_through: None,
        };
        let plan = plan_retention(
            &messages,
            &state,
            recorded + Duration::minutes(1),
            &ThinkingConfig::default(),
        );
        assert!(!plan.latched);
    }

    #[test]
    fn keep_counts_only_messages_with_reasoning_and_never_strips_the_latest() {
        let messages = history(vec![
            user("a"),
            assistant(vec![signed("r1", "bedrock", "s1"), Part::text("1")]),
            user("b"),
            assistant(vec![signed("r2", "vertex", "s2"), Part::text("2")]),
            user("c"),
            assistant(vec![Part::text("no reasoning")]),
            user("d"),
            assistant(vec![signed("r4", "anthropic", "s4"), call("x")]),
        ]);
        let state = ThinkingState {
            latched: true,
            last_completion: None,
            stripped_through: None,
        };
        let keep_two = ThinkingConfig {
            keep_recent: 2,
            ..ThinkingConfig::default()
        };
        assert_eq!(
            plan_retention(&messages, &state, t0(), &keep_two).strip,
            vec![2]
        );
        let keep_none = ThinkingConfig {
            keep_recent: 0,
            ..ThinkingConfig::default()
        };
        assert_eq!(
            plan_retention(&messages, &state, t0(), &keep_none).strip,
            vec![2, 4]
        );
    }

    /// The latest assistant message the provider sees keeps its thinking even when a later
    /// stored assistant message renders to nothing (only unsigned reasoning from another
    /// provider, or blank text): in a tool loop Anthropic requires it back unchanged.
    #[test]
    fn latest_visible_assistant_keeps_its_thinking_after_an_invisible_one() {
        for invisible in [
            vec![Part::reasoning("other provider", None)],
            vec![Part::text(" ")],
            vec![],
        ] {
            let messages = history(vec![
                user("a"),
                assistant(vec![signed("r1", "anthropic", "s1"), call("x")]),
                tool(vec![Part::tool_result("x", "ok")]),
                assistant(vec![signed("r2", "bedrock", "s2"), call("y")]),
                tool(vec![Part::tool_result("y", "ok")]),
                assistant(invisible),
            ]);
            let state = ThinkingState {
                latched: true,
                last_completion: None,
                stripped_through: None,
            };
            for keep_recent in [0, 1] {
                let config = ThinkingConfig {
                    keep_recent,
                    ..ThinkingConfig::default()
                };
                let strip = plan_retention(&messages, &state, t0(), &config).strip;
                assert!(!strip.contains(&4), "keep {keep_recent}: {strip:?}");
                assert!(strip.contains(&2), "keep {keep_recent}: {strip:?}");
            }
        }
    }

    #[test]
    fn a_message_loses_all_of_its_reasoning_at_once() {
        let messages = history(vec![
            user("a"),
            assistant(vec![
                signed("r1", "anthropic", "s1"),
                Part::text(""),
                Part::RedactedReasoning {
                    data: "opaque".to_owned(),
                    provider_metadata: None,
                },
                Part::text("1"),
            ]),
            user("b"),
            assistant(vec![Part::text("2")]),
        ]);
        let retention = Retention {
            latched: true,
            newly_latched: false,
            fired_through: None,
            strip: vec![2],
        };
        let kept = apply_retention(&messages, &retention);
        assert_eq!(kept[1].parts, vec![Part::text(""), Part::text("1")]);
        // Without its signed reasoning, the empty text is dropped, not sent as a space.
        let view = crate::history::sanitize::sanitize(&kept);
        assert_eq!(view.messages[1].parts, vec![Part::text("1")]);
    }
}
