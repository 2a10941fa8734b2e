//! The token budget of a session: how big the next request is, and the smallest compaction
//! on a turn boundary that brings it under a limit.
//!
//! **The estimate.** A provider reports the size of each prompt it read (the usage ledger:
//! input tokens plus cache-read and cache-write tokens, everything it read). The latest
//! such report is the anchor; what was appended after it is estimated, and so is the whole
//! prompt when there is no report or a compaction changed the prompt since (then the
//! report no longer describes it). The estimate of a message ([`estimate_message`]) is
//! [`FRAME_TOKENS`] for the message and for each part, plus one token per
//! [`BYTES_PER_TOKEN`] bytes of what the part sends (text, reasoning, a call's name and
//! JSON input, a result's content; the JSON of a kind the store keeps verbatim), plus
//! [`MEDIA_TOKENS`] per image or document (a tool result's included). Four bytes a token is the usual figure for
//! English and code under the providers' BPE tokenizers; the framing covers role markers
//! and block delimiters. The message the report came with counts its reported output
//! tokens when there are some (it is sent back in the next request).
//!
//! **The plan.** When the estimate is over the limit, [`plan_budget`] tries the cuts
//! [`plan_compaction`] makes (a user message that opens a turn; never the last turn), the
//! fewest turns first, and takes the first whose request would fit: what stays visible
//! after it (the kept turns, and the system messages of the compacted ones, which are still
//! sent) estimated as above, plus [`SUMMARY_TOKENS`] for the summary the compaction writes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::compaction::{plan_compaction, CompactionPlan};
use crate::model::{Message, Part, Role};

/// Bytes of UTF-8 counted as one token.
pub const BYTES_PER_TOKEN: u64 = 4;
/// Tokens of framing per message and per part (role markers, block delimiters).
pub const FRAME_TOKENS: u64 = 4;
/// Tokens counted for one image or document.
pub const MEDIA_TOKENS: u64 = 1_600;
/// Tokens a planned compaction reserves for the summary it writes: a summary this size or
/// smaller keeps the request under the limit the plan was made for.
pub const SUMMARY_TOKENS: u64 = 1_024;

/// The latest prompt size a provider reported for the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    /// The `seq` of the assistant message the report came with.
    pub seq: i64,
    /// Input plus cache-read plus cache-write tokens: all the provider read.
    pub input_tokens: u64,
    /// That message's own output tokens, when reported.
    pub output_tokens: Option<u64>,
}

/// The latest summary, as far as the budget needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryNote {
    /// Its text (sent in place of the compacted turns).
    pub text: String,
    /// When the compaction ran.
    pub created_at: DateTime<Utc>,
}

/// A session's token budget (`session-store budget`, [`crate::Store::budget`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The latest prompt size a provider reported (input + cache read + cache write), when
    /// the ledger has one that still describes the prompt; `None` when it has none or a
    /// compaction changed the prompt since.
    pub reported_input_tokens: Option<u64>,
    /// The estimate of what the request holds beyond the reported prompt (all of it when
    /// nothing is reported).
    pub estimated_since: u64,
    /// `reported_input_tokens + estimated_since`: the next request's size.
    pub estimate: u64,
    /// The limit asked about.
    pub limit: u64,
    /// `estimate > limit`.
    pub over: bool,
    /// When over: the last turn of the smallest compaction on a turn boundary that brings
    /// the estimate under the limit; `None` when none is needed or none can.
    pub compact_through_turn: Option<i64>,
    /// With `compact_through_turn`: the `--min-keep-tail` (messages kept) that makes
    /// exactly that compaction (`Store::compact`, `session-store compact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_messages: Option<usize>,
}

/// The estimated tokens of one part (see the module docs for the method).
pub fn estimate_part(part: &Part) -> u64 {
    let bytes = |n: usize| (n as u64).div_ceil(BYTES_PER_TOKEN);
    let body = match part {
        Part::Text { text, .. } | Part::Reasoning { text, .. } => bytes(text.len()),
        Part::ToolUse { name, input, .. } => bytes(name.len() + input.to_string().len()),
        // A structured result's images and documents count as media, not as their base64
        // (a screenshot's megabyte of data is not a quarter million tokens).
        Part::ToolResult {
            content, blocks, ..
        } => match blocks {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item.get("type").and_then(Value::as_str) {
                    Some("image" | "document") => MEDIA_TOKENS,
                    _ => bytes(item.to_string().len()),
                })
                .sum(),
            Some(other) => bytes(other.to_string().len()),
            None => bytes(content.len()),
        },
        Part::Image { .. } | Part::Document { .. } => MEDIA_TOKENS,
        other => bytes(serde_json::to_string(other).map_or(0, |json| json.len())),
    };
    FRAME_TOKENS + body
}

/// The estimated tokens of one message: its framing and its parts.
pub fn estimate_message(message: &Message) -> u64 {
    FRAME_TOKENS + message.parts.iter().map(estimate_part).sum::<u64>()
}

/// The estimated tokens of a summary as the request sends it.
fn estimate_summary(text: &str) -> u64 {
    2 * FRAME_TOKENS + (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Whether a message is in what the provider is sent (not compacted, or a system message).
fn visible(message: &Message) -> bool {
    !message.compacted || message.role == Role::System
}

/// The budget of a session: `messages` all of it in `seq` order, `summary` its latest
/// summary, `reported` its latest ledger entry.
pub fn plan_budget(
    messages: &[Message],
    summary: Option<&SummaryNote>,
    reported: Option<Reported>,
    limit: u64,
) -> Budget {
    let whole: u64 = messages
        .iter()
        .filter(|m| visible(m))
        .map(estimate_message)
        .sum::<u64>()
        + summary.map_or(0, |s| estimate_summary(&s.text));
    // The report describes the prompt only if its message is still sent and no compaction
    // ran after it.
    let current = reported.filter(|r| {
        messages.iter().any(|m| {
            m.seq == r.seq && !m.compacted && summary.is_none_or(|s| s.created_at <= m.created_at)
        })
    });
    let (reported_input_tokens, estimated_since) = match current {
        Some(r) => {
            let since = messages
                .iter()
                .filter(|m| m.seq >= r.seq && visible(m))
                .map(|m| match (m.seq == r.seq, r.output_tokens) {
                    (true, Some(output)) => FRAME_TOKENS + output,
                    _ => estimate_message(m),
                })
                .sum();
            (Some(r.input_tokens), since)
        }
        None => (None, whole),
    };
    // The report is at most `i64::MAX` (the store refuses a larger one) and so is a
    // message's output count: the sum stays in range but for an estimate no limit can be.
    let estimate = reported_input_tokens
        .unwrap_or(0)
        .saturating_add(estimated_since);
    let over = estimate > limit;
    let cut = if over {
        smallest_cut(messages, limit)
    } else {
        None
    };
    Budget {
        reported_input_tokens,
        estimated_since,
        estimate,
        limit,
        over,
        compact_through_turn: cut.map(|(turn, _)| turn),
        keep_messages: cut.map(|(_, keep)| keep),
    }
}

/// The estimate of the request after compacting everything before message `cut`.
pub fn estimate_after_cut(messages: &[Message], cut: usize) -> u64 {
    let head: u64 = messages[..cut]
        .iter()
        .filter(|m| m.role == Role::System)
        .map(estimate_message)
        .sum();
    let tail: u64 = messages[cut..]
        .iter()
        .filter(|m| visible(m))
        .map(estimate_message)
        .sum();
    head + tail + SUMMARY_TOKENS
}

/// The fewest turns whose compaction brings the request under `limit`: (the last compacted
/// turn, the messages kept), found among the cuts [`plan_compaction`] makes.
fn smallest_cut(messages: &[Message], limit: u64) -> Option<(i64, usize)> {
    let len = messages.len();
    // From the largest kept tail (the fewest turns compacted) down; each distinct cut once.
    let mut tried = None;
    for keep in (1..len).rev() {
        let CompactionPlan::Compact(cut) = plan_compaction(messages, keep) else {
            continue;
        };
        if tried == Some(cut.cut) {
            continue;
        }
        tried = Some(cut.cut);
        if estimate_after_cut(messages, cut.cut) <= limit {
            return Some((cut.last_compacted_turn(), len - cut.cut));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::testing::history;
    use proptest::prelude::*;

    /// A screenshot in a tool result counts as one image, not as its base64 text.
    #[test]
    fn a_results_images_count_as_media_not_as_their_data() {
        let data = "A".repeat(1_000_000);
        let result = Part::ToolResult {
            tool_use_id: "c".into(),
            content: "shot".into(),
            is_error: false,
            blocks: Some(serde_json::json!([
                {"type": "text", "text": "shot"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
            ])),
            provider_metadata: None,
        };
        let text = r#"{"text":"shot","type":"text"}"#.len() as u64;
        assert_eq!(
            estimate_part(&result),
            FRAME_TOKENS + text.div_ceil(BYTES_PER_TOKEN) + MEDIA_TOKENS
        );
    }

    /// A session of `turns` (each: user text, assistant text of the given sizes).
    fn session(turns: &[(usize, usize)]) -> Vec<Message> {
        let mut list = Vec::new();
        for (i, (asked, answered)) in turns.iter().enumerate() {
            list.push((Role::User, vec![Part::text("q".repeat(*asked))]));
            if i % 3 == 1 {
                list.push((Role::System, vec![Part::text("s".repeat(40))]));
            }
            list.push((Role::Assistant, vec![Part::text("a".repeat(*answered))]));
        }
        history(list)
    }

    /// The session after the compaction a budget plans: everything before the cut compacted,
    /// a summary of `summary_len` bytes written after every message.
    fn compacted(
        messages: &[Message],
        keep: usize,
        summary_len: usize,
    ) -> (Vec<Message>, SummaryNote) {
        let cut = messages.len() - keep;
        let mut after = messages.to_vec();
        for m in &mut after[..cut] {
            m.compacted = true;
        }
        let last = after.last().map(|m| m.created_at).unwrap_or_default();
        (
            after,
            SummaryNote {
                text: "x".repeat(summary_len),
                created_at: last + chrono::Duration::seconds(1),
            },
        )
    }

    #[test]
    fn under_the_limit_nothing_is_planned() {
        let messages = session(&[(40, 400), (40, 400)]);
        let budget = plan_budget(&messages, None, None, 10_000);
        assert!(!budget.over);
        assert_eq!(budget.compact_through_turn, None);
        assert_eq!(budget.reported_input_tokens, None);
        assert_eq!(budget.estimate, budget.estimated_since);
    }

    #[test]
    fn the_ledger_anchors_the_estimate_until_a_compaction_runs_after_it() {
        let messages = session(&[(40, 400), (40, 400), (40, 400)]);
        let reported = Reported {
            seq: messages[3].seq,
            input_tokens: 5_000,
            output_tokens: Some(90),
        };
        let budget = plan_budget(&messages, None, Some(reported), 100_000);
        assert_eq!(budget.reported_input_tokens, Some(5_000));
        let after: u64 = messages[4..].iter().map(estimate_message).sum();
        assert_eq!(budget.estimated_since, FRAME_TOKENS + 90 + after);
        assert_eq!(budget.estimate, 5_000 + budget.estimated_since);
        let (later, summary) = compacted(&messages, 2, 10);
        let stale = plan_budget(&later, Some(&summary), Some(reported), 100_000);
        assert_eq!(stale.reported_input_tokens, None);
    }

    #[test]
    fn no_cut_when_even_the_last_turn_alone_is_over() {
        let messages = session(&[(40, 40), (40, 40), (4_000, 40_000)]);
        let budget = plan_budget(&messages, None, None, 2_000);
        assert!(budget.over);
        assert_eq!(budget.compact_through_turn, None);
    }

    proptest! {
        /// Compacting through the planned turn never splits a turn and brings the estimate
        /// under the limit; when no turn is planned while over, no cut can.
        #[test]
        fn the_planned_compaction_fits_and_is_the_smallest(
            turns in prop::collection::vec((1usize..2_000, 1usize..8_000), 1..12),
            limit in 100u64..12_000,
            summary_len in 0usize..(SUMMARY_TOKENS as usize * 4 - 64),
        ) {
            let messages = session(&turns);
            let budget = plan_budget(&messages, None, None, limit);
            prop_assert_eq!(budget.over, budget.estimate > limit);
            let boundaries: Vec<usize> = (1..messages.len())
                .filter(|&i| messages[i].role == Role::User)
                .collect();
            match (budget.compact_through_turn, budget.keep_messages) {
                (Some(turn), Some(keep)) => {
                    let cut = messages.len() - keep;
                    prop_assert!(boundaries.contains(&cut), "cut {} is not a turn start", cut);
                    prop_assert_eq!(messages[cut].turn_index, turn + 1);
                    prop_assert!(messages[..cut].iter().all(|m| m.turn_index <= turn));
                    let (after, summary) = compacted(&messages, keep, summary_len);
                    let again = plan_budget(&after, Some(&summary), None, limit);
                    prop_assert!(again.estimate <= limit, "{} > {}", again.estimate, limit);
                    // The smallest: no cut with fewer turns fits.
                    for &smaller in boundaries.iter().filter(|&&b| b < cut) {
                        prop_assert!(estimate_after_cut(&messages, smaller) > limit);
                    }
                }
                (None, None) => {
                    if budget.over {
                        for &b in &boundaries {
                            prop_assert!(estimate_after_cut(&messages, b) > limit);
                        }
                    }
                }
                other => prop_assert!(false, "turn and keep disagree: {:?}", other),
            }
        }
    }
}
