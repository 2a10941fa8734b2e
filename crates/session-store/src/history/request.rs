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
/// has one ([`models::latest_model`]). The store runs [`build_owned`]; this is its form over
/// borrowed messages, for tests.
#[cfg(test)]
pub(crate) fn build_request(
    summary: Option<&str>,
    messages: &[Message],
    state: &ThinkingState,
    now: DateTime<Utc>,
    config: &ThinkingConfig,
    provider: Provider,
    model: Option<&str>,
) -> Request {
    let inputs = Inputs {
        summary,
        state,
        now,
        config,
        provider,
        model,
    };
    let mut request = build_owned(messages.to_vec(), &inputs, true);
    request.digests = render::digests(&request.body);
    request
}

/// What a request is built from, besides the messages.
pub(crate) struct Inputs<'a> {
    /// The latest compaction summary's text.
    pub summary: Option<&'a str>,
    /// The session's thinking state.
    pub state: &'a ThinkingState,
    /// When the request is sent.
    pub now: DateTime<Utc>,
    /// Thinking retention's settings.
    pub config: &'a ThinkingConfig,
    /// The format.
    pub provider: Provider,
    /// The target model, `provider/model`.
    pub model: Option<&'a str>,
}

/// [`build_request`] over messages the caller gives up, without `digests`; the view is kept
/// in the request only when `keep_view` is set (else it is left empty). Each step moves the
/// messages on instead of copying them: retention and the model binding strip in place, the
/// loader moves the parts into the view, and the Anthropic renderer moves the view's strings
/// into the body (issue 16: the session's text was copied three times). What the checks after
/// rendering need of the messages is taken before they move.
pub(crate) fn build_owned(messages: Vec<Message>, inputs: &Inputs<'_>, keep_view: bool) -> Request {
    let provider = inputs.provider;
    let retention = thinking::plan_retention(&messages, inputs.state, inputs.now, inputs.config);
    let kept = thinking::retained_owned(messages, &retention);
    let target: Option<String> = inputs
        .model
        .or_else(|| models::latest_model(&kept))
        .map(str::to_owned);
    let target = target.as_deref();
    let foreign = target.map(|target| contract::foreign_signatures(&kept, target));
    let bound = models::bind_owned(kept, target);
    // Rule 9 reads the latest assistant message only.
    let latest = (provider == Provider::Anthropic)
        .then(|| {
            bound
                .iter()
                .rev()
                .find(|m| m.role == crate::model::Role::Assistant)
                .cloned()
        })
        .flatten();
    let view = sanitize::sanitize_owned(inputs.summary, bound);
    let (body, view) = if keep_view {
        (render::render_owned(view.clone(), provider, target), view)
    } else {
        (
            render::render_owned(view, provider, target),
            View::default(),
        )
    };
    let mut violations = contract::check(provider, &body);
    if let (Some(foreign), Some(target)) = (&foreign, target) {
        violations.extend(contract::check_foreign_signatures(foreign, target, &body));
    }
    if let Some(latest) = latest {
        violations.extend(contract::check_latest_thinking(
            std::slice::from_ref(&latest),
            &body,
        ));
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
