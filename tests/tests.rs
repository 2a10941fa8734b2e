//! Integration tests.
mod provider_transcripts;
