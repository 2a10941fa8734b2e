//! Pure history logic: turn boundaries, pairing rules and everything else that reasons about a
//! list of messages.
//!
//! Architecture invariant: nothing under `history` does I/O. It imports nothing from
//! rusqlite, r2d2 or `std::fs`, and takes `now` as a parameter instead of reading the clock,
//! so every rule here is testable with plain vectors.

pub mod blank;
pub mod budget;
pub mod compaction;
pub mod grammar;
pub(crate) mod media;
pub mod mend;
pub mod models;
pub mod paging;
pub mod pairing;
pub mod provider;
pub mod rules;
pub mod tail;
pub mod texts;
pub mod transcript;
pub mod turns;

// Provider-ready history (issue 4).
pub mod contract;
pub mod render;
pub mod request;
pub(crate) mod result_blocks;
pub mod sanitize;
pub mod signed;
pub mod subagents;
#[cfg(test)]
pub(crate) mod testing;
pub mod thinking;
