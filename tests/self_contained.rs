//! The repository is self-contained: a fresh clone with nothing beside it builds and passes
//! its tests. Files outside it (a sibling `shared` folder with fixtures and the contract)
//! once were read by 17 tests and linked from the README, and CI stayed green only because
//! its machine had them. This test fails if any file in the repository refers to that
//! sibling folder again, or if a fixture the tests read lacks its sources and licences.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Build output and version control are not the repository's files; the
        // transcripts are data written by others.
        if name == "target" || name.starts_with('.') && name != ".ci" || name == "fixtures" {
            continue;
        }
        if path.is_dir() {
            walk(&path, found);
        } else {
            found.push(path);
        }
    }
}

#[test]
fn no_file_in_the_repository_refers_to_a_folder_beside_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(root, &mut files);
    assert!(files.len() > 50, "walked the repository: {files:?}");
    // Spelled in two pieces so that this file does not match itself.
    let sibling = concat!("..", "/shared");
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| {
            std::fs::read(path)
                .map(|bytes| String::from_utf8_lossy(&bytes).contains(sibling))
                .unwrap_or(false)
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "{sibling} is referenced by {offenders:?}"
    );
}

#[test]
fn the_fixtures_carry_their_sources_and_licences() {
    let fixtures = crate::util::transcripts();
    let sources = std::fs::read_to_string(fixtures.join("SOURCES.md")).expect("SOURCES.md");
    let licences = std::fs::read_to_string(fixtures.join("LICENSES.md")).expect("LICENSES.md");
    for origin in [
        "fasthooks",
        "spotter",
        "agentcmd",
        "pydantic-ai",
        "llm-gemini",
        "claude-code-log",
    ] {
        assert!(fixtures.join(origin).is_dir(), "{origin}/ copied");
        assert!(
            sources.contains(&format!("`{origin}/`")),
            "{origin} in SOURCES.md"
        );
        assert!(
            licences.contains(&format!("`{origin}/`")),
            "{origin} in LICENSES.md"
        );
    }
    assert!(licences.contains("Permission is hereby granted, free of charge"));
    assert!(fixtures.join("llm-gemini/LICENSE-APACHE-2.0").is_file());
    for doc in ["docs/CONTRACT.md", "docs/PROVIDER_RULES.md"] {
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(doc).is_file(),
            "{doc} is in the repository"
        );
    }
}
