//! Tables that fit the terminal: the width a table may take (`COLUMNS`, else the terminal's
//! width when stdout is one, else none: piped output keeps every column), and the shortest
//! unique id prefixes that let a narrow table name sessions as every command accepts them.

use std::io::IsTerminal;

use crate::open::MIN_PREFIX;

/// The columns a table may take: `$COLUMNS` when set to a number, else the width of the
/// terminal stdout is, else `None` (not a terminal: nothing is cut).
pub fn width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    console::Term::stdout()
        .size_checked()
        .map(|(_, columns)| usize::from(columns))
}

/// For each of `ids`, how many characters name it uniquely among them: at least
/// [`MIN_PREFIX`] (what a command accepts), one more than it shares with any other id, at
/// most the whole id.
pub fn unique_prefixes(ids: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i]);
    let shared = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let mut lengths = vec![0; ids.len()];
    for (k, &i) in order.iter().enumerate() {
        let before = k
            .checked_sub(1)
            .map_or(0, |j| shared(ids[order[j]], ids[i]));
        let after = order.get(k + 1).map_or(0, |&j| shared(ids[j], ids[i]));
        let whole = ids[i].chars().count();
        lengths[i] = (before.max(after) + 1).max(MIN_PREFIX).min(whole);
    }
    lengths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_unique_and_never_shorter_than_a_command_accepts() {
        let ids = [
            "0b6f3c2a-1111-4000-8000-000000000001",
            "0b6f3c2a-1112-4000-8000-000000000002",
            "7d41e9aa-2222-4000-8000-000000000003",
            "short",
            "0b6f3c2a-1111-4000-8000-000000000001-child",
        ];
        let lengths = unique_prefixes(&ids);
        assert_eq!(lengths, [36, 13, 8, 5, 37]);
        for (i, id) in ids.iter().enumerate() {
            let prefix: String = id.chars().take(lengths[i]).collect();
            let matching = ids
                .iter()
                .filter(|other| other.starts_with(&prefix))
                .count();
            // An id that is a prefix of another is named by its whole self (exact match).
            assert!(matching == 1 || prefix == *id, "{prefix}");
        }
        assert!(unique_prefixes(&[]).is_empty());
        assert_eq!(unique_prefixes(&["abcdefghijkl"]), [8]);
    }
}
