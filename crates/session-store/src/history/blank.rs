//! What counts as blank text: the one definition the loader, the renderers and the contract
//! checks share.
//!
//! Providers reject whitespace-only text (PROVIDER_RULES 7), and they do not all agree on
//! what whitespace is: besides Unicode `White_Space` (Rust's `char::is_whitespace`), Python's
//! `str.isspace` counts the separators U+001C..U+001F, and JavaScript's `trim` counts U+FEFF.
//! Text made only of the union is blank here, so no provider sees it as whitespace-only.

/// True when `text` is empty or holds only whitespace by any provider's definition.
pub fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || matches!(c, '\u{1c}'..='\u{1f}' | '\u{feff}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_and_bom_are_blank_like_other_whitespace() {
        for text in [
            "", " ", "\n\t", "\u{a0}", "\u{3000}", "\u{85}", "\u{1f}", "\u{1c} ", "\u{feff}",
        ] {
            assert!(is_blank(text), "{text:?}");
        }
        for text in ["x", " x ", "\u{200b}", "\u{1f}a"] {
            assert!(!is_blank(text), "{text:?}");
        }
    }
}
