//! The whole way from stored messages to a checked request body, as one pure function.
//!
//! `retention -> sanitize -> render -> check`: thinking retention decides on the stored
//! messages (it needs their `seq` and times), the loader builds the view from what is left,
//! the renderer writes the body, and the contract checks run on the result so a caller can
//! refuse to send, or report, anything a provider would reject.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::contract::{self, ProviderViolation};
use crate::history::render::{self, MessageDigest, Provider};
use crate::history::sanitize::{self, View};
use crate::history::thinking::{self, Retention, ThinkingConfig, ThinkingState};
use crate::model::Message;

/// A rendered request and how it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The request body (`{"system", "messages"}` or `{"messages"}`).
    pub body: Value,
    /// The view it was rendered from, with the loader's repairs.
    pub view: View,
    /// What thinking retention decided (and whether the latch turned on now).
    pub retention: Retention,
    /// One digest per rendered message, to compare with an earlier request.
    pub digests: Vec<MessageDigest>,
    /// What the provider would reject; empty unless the renderer has a bug.
    pub violations: Vec<ProviderViolation>,
}

/// Builds `provider`'s request from `messages` (in `seq` order, without compacted ones) at
/// `now`, given the session's thinking `state`. `summary` is the text of the latest
/// compaction summary, sent first (see [`sanitize::sanitize_with_summary`]).
pub fn build_request(
    summary: Option<&str>,
    messages: &[Message],
    state: &ThinkingState,
    now: DateTime<Utc>,
    config: &ThinkingConfig,
    provider: Provider,
) -> Request {
    let retention = thinking::plan_retention(messages, state, now, config);
    let kept = thinking::apply_retention(messages, &retention);
    let view = sanitize::sanitize_with_summary(summary, &kept);
    let body = render::render(&view, provider);
    let digests = render::digests(&body);
    let mut violations = contract::check(provider, &body);
    if provider == Provider::Anthropic {
        violations.extend(contract::check_latest_thinking(&kept, &body));
    }
    Request {
        body,
        view,
        retention,
        digests,
        violations,
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use proptest::prelude::*;

    use super::*;
    use crate::history::testing::{arb, history, t0};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever retention decides (latched or not, any K), the request passes the
        /// contract, the latest assistant message's thinking included.
        #[test]
        fn requests_pass_the_contract_whatever_retention_decides(
            raw in arb::messages(14),
            latched in any::<bool>(),
            idle_minutes in 0i64..20,
            keep_recent in 0usize..3,
        ) {
            let messages = history(raw);
            let state = ThinkingState { latched, last_completion: Some(t0()) };
            let config = ThinkingConfig { keep_recent, ..ThinkingConfig::default() };
            let now = t0() + Duration::minutes(idle_minutes);
            for provider in [Provider::Anthropic, Provider::OpenAi] {
                let request = build_request(None, &messages, &state, now, &config, provider);
                prop_assert_eq!(&request.violations, &vec![], "{:#}", request.body);
                prop_assert_eq!(request.digests.len(), request.body["messages"].as_array().map_or(0, Vec::len) + usize::from(request.body.get("system").is_some()));
            }
        }
    }
}
