//! The whole way from stored messages to a checked request body, as one pure function.
//!
//! `retention -> bind to the model -> sanitize -> render -> check`: thinking retention
//! decides on the stored messages (it needs their `seq` and times), thinking another model
//! signed is taken out (PROVIDER_RULES 10c), the loader builds the view from what is left,
//! the renderer writes the body, and the contract checks run on the result so a caller can
//! refuse to send, or report, anything a provider would reject.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::contract::{self, ProviderViolation};
use crate::history::models;
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
    /// The model the request was built for (`provider/model`): the one asked for, else the
    /// model of the latest assistant message that has one.
    pub model: Option<String>,
}

/// Builds `provider`'s request from `messages` (in `seq` order, without compacted ones) at
/// `now`, given the session's thinking `state`. `summary` is the text of the latest
/// compaction summary, sent first (see [`sanitize::sanitize_with_summary`]). `model` is the
/// target (`provider/model`); without one, the model of the latest assistant message that
/// has one ([`models::latest_model`]).
pub fn build_request(
    summary: Option<&str>,
    messages: &[Message],
    state: &ThinkingState,
    now: DateTime<Utc>,
    config: &ThinkingConfig,
    provider: Provider,
    model: Option<&str>,
) -> Request {
    let mut request =
        build_request_without_digests(summary, messages, state, now, config, provider, model);
    request.digests = render::digests(&request.body);
    request
}

/// [`build_request`] with `digests` left empty, for a caller that sends the body only:
/// hashing every rendered message costs about as much as rendering them (issue 16).
pub(crate) fn build_request_without_digests(
    summary: Option<&str>,
    messages: &[Message],
    state: &ThinkingState,
    now: DateTime<Utc>,
    config: &ThinkingConfig,
    provider: Provider,
    model: Option<&str>,
) -> Request {
    let retention = thinking::plan_retention(messages, state, now, config);
    let kept = thinking::retained(messages, &retention);
    let target = model.or_else(|| models::latest_model(messages));
    let bound = models::bind_to_model(&kept, target);
    let view = sanitize::sanitize_with_summary(summary, &bound);
    let body = render::render_for(&view, provider, target);
    let mut violations = contract::check(provider, &body);
    violations.extend(contract::check_signed_by_target(&kept, target, &body));
    if provider == Provider::Anthropic {
        violations.extend(contract::check_latest_thinking(&bound, &body));
    }
    Request {
        body,
        view,
        retention,
        digests: Vec::new(),
        violations,
        model: target.map(str::to_owned),
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
            let state = ThinkingState { latched, last_completion: Some(t0()), stripped_through: None };
            let config = ThinkingConfig { keep_recent, ..ThinkingConfig::default() };
            let now = t0() + Duration::minutes(idle_minutes);
            for provider in Provider::ALL {
                let request = build_request(None, &messages, &state, now, &config, provider, None);
                prop_assert_eq!(&request.violations, &vec![], "{:#}", request.body);
                if matches!(provider, Provider::Anthropic | Provider::OpenAi) {
                    prop_assert_eq!(request.digests.len(), request.body["messages"].as_array().map_or(0, Vec::len) + usize::from(request.body.get("system").is_some()));
                }
            }
        }
    }
}
