//! The fuzz targets of `fuzz/` (run with `cargo fuzz` for long campaigns) as a bounded
//! random-input run in the normal suite, so that the failures they guard cannot come back
//! unnoticed: an importer that panics or accepts what the store then refuses, reads that
//! disagree about a row outside the contract (one refusing a session another reads), an
//! export that breaks the provider's contract, a mend that leaves a session broken, deletes
//! a row or changes something the second time, and a damaged file that makes the tool
//! panic. Every committed corpus file (seeds, and each crash a campaign found) runs first.

use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;
use session_store::import::Format;

use crate::fuzz_harness as harness;

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus(target))
        .unwrap_or_else(|e| panic!("corpus {target}: {e}"))
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read(f).expect("read seed"))
        .collect()
}

/// A target's corpus folder and its body.
type Target = (&'static str, fn(&[u8]));

const TARGETS: [Target; 10] = [
    ("import_anthropic", |d| {
        harness::import(Format::Anthropic, d)
    }),
    ("import_openai", |d| harness::import(Format::OpenAi, d)),
    ("import_claude_code", |d| {
        harness::import(Format::ClaudeCode, d)
    }),
    ("import_responses", |d| {
        harness::import(Format::Responses, d)
    }),
    ("import_gemini", |d| harness::import(Format::Gemini, d)),
    ("import_codex", |d| harness::import(Format::Codex, d)),
    ("loader", harness::loader),
    ("repair", harness::repair),
    ("copy", harness::copy),
    ("search_query", harness::search_query),
];

#[test]
fn every_committed_corpus_file_passes_its_target() {
    for (target, run) in TARGETS {
        let seeds = seeds(target);
        assert!(!seeds.is_empty(), "{target} has no corpus");
        for seed in seeds {
            run(&seed);
        }
    }
}

/// A seed of `target` with a few bytes replaced, inserted or removed, the way a coverage
/// fuzzer mutates its corpus.
fn mutated(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds(target);
    (
        0..seeds.len(),
        vec((any::<u16>(), any::<u8>(), 0..3u8), 1..6),
    )
        .prop_map(move |(pick, edits)| {
            let mut data = seeds[pick].clone();
            for (at, byte, op) in edits {
                let at = usize::from(at) % (data.len() + 1);
                match op {
                    0 if at < data.len() => data[at] = byte,
                    1 => data.insert(at, byte),
                    _ if at < data.len() => {
                        data.remove(at);
                    }
                    _ => data.push(byte),
                }
            }
            data
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn import_anthropic_never_panics_and_stores_only_healthy(data in mutated("import_anthropic")) {
        harness::import(Format::Anthropic, &data);
    }

    #[test]
    fn import_openai_never_panics_and_stores_only_healthy(data in mutated("import_openai")) {
        harness::import(Format::OpenAi, &data);
    }

    #[test]
    fn import_claude_code_never_panics_and_stores_only_healthy(data in mutated("import_claude_code")) {
        harness::import(Format::ClaudeCode, &data);
    }

    #[test]
    fn import_responses_never_panics_and_stores_only_healthy(data in mutated("import_responses")) {
        harness::import(Format::Responses, &data);
    }

    #[test]
    fn import_gemini_never_panics_and_stores_only_healthy(data in mutated("import_gemini")) {
        harness::import(Format::Gemini, &data);
    }

    #[test]
    fn import_codex_never_panics_and_stores_only_healthy(data in mutated("import_codex")) {
        harness::import(Format::Codex, &data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_read_agrees_on_random_rows(data in vec(any::<u8>(), 0..300)) {
        harness::loader(&data);
    }

    #[test]
    fn store_repair_mends_random_damage(data in vec(any::<u8>(), 0..300)) {
        harness::repair(&data);
    }
}

proptest! {
    // Each case copies a database twice: fewer cases keep it near the others' time.
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn copy_reads_back_random_rows_or_leaves_no_file(data in vec(any::<u8>(), 0..300)) {
        harness::copy(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_search_query_fails_but_for_too_many_terms(data in mutated("search_query")) {
        harness::search_query(&data);
    }
}
