//! Pages and slices that split a turn, or silently stop: a page cut by message count hands a
//! reader a tool_use whose result is on the next page, and a list that quietly stops at 1,000
//! rows feeds a truncated history to the provider. These tests pin pages of whole turns (at
//! least one, even a turn longer than the page), slices by turn, and reads with no hidden cap.

use session_store::{Message, NewMessage, Store, TurnCursor};

use crate::turn_fixtures::{open_store, session_of_turns};

/// Reads every page of the session with `max` and returns them.
pub fn all_pages(
    store: &Store,
    session: &session_store::SessionId,
    max: usize,
) -> session_store::Result<Vec<Vec<Message>>> {
    let mut pages = Vec::new();
    let mut after: Option<TurnCursor> = None;
    loop {
        let page = store.page(session, after, max)?;
        let next = page.next;
        pages.push(page.messages);
        match next {
            Some(cursor) => {
                assert!(after < Some(cursor), "the cursor moves forward");
                after = Some(cursor);
            }
            None => return Ok(pages),
        }
    }
}

#[test]
fn a_turn_longer_than_the_page_comes_whole() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    // Turns of 4, 22 and 8 messages.
    let session = session_of_turns(&store, &[1, 10, 3])?;
    let sizes: Vec<usize> = all_pages(&store, &session, 5)?
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(sizes, [4, 22, 8]);
    let sizes: Vec<usize> = all_pages(&store, &session, 0)?
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(sizes, [4, 22, 8], "a page of 0 is one turn");
    let sizes: Vec<usize> = all_pages(&store, &session, 30)?
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(sizes, [26, 8]);
    Ok(())
}

#[test]
fn pages_of_an_empty_session_end_at_once() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    let page = store.page(&session, None, 10)?;
    assert!(page.messages.is_empty());
    assert_eq!(page.next, None);
    Ok(())
}

#[test]
fn a_cursor_past_the_end_reads_nothing() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 1])?;
    let page = store.page(&session, Some(TurnCursor::after(1)), 10)?;
    assert!(page.messages.is_empty());
    assert_eq!(page.next, None);
    Ok(())
}

/// 2,500 messages: more than any page size a library might cap at (1,000), read whole.
#[test]
fn no_hidden_cap_on_long_sessions() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = store.create_session()?;
    let batch: Vec<NewMessage> = (0..2_500)
        .map(|i| NewMessage::user(format!("message {i}")))
        .collect();
    store.append_batch(&session, batch)?;
    assert_eq!(store.messages(&session)?.len(), 2_500);
    assert_eq!(store.turns(&session, ..)?.len(), 2_500);
    assert_eq!(store.last_turns(&session, usize::MAX)?.len(), 2_500);
    assert_eq!(store.provider_history(&session)?.messages.len(), 2_500);
    let page = store.page(&session, None, usize::MAX)?;
    assert_eq!((page.messages.len(), page.next), (2_500, None));
    let pages = all_pages(&store, &session, 1_000)?;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [1_000, 1_000, 500]
    );
    Ok(())
}

#[test]
fn slices_hold_whole_turns() -> session_store::Result<()> {
    let (_dir, store) = open_store()?;
    let session = session_of_turns(&store, &[1, 3, 0, 10, 2])?;
    let all = store.messages(&session)?;
    let of_turns = |turns: std::ops::RangeInclusive<i64>| -> Vec<Message> {
        all.iter()
            .filter(|m| turns.contains(&m.turn_index))
            .cloned()
            .collect()
    };
    assert_eq!(store.last_turns(&session, 2)?, of_turns(3..=4));
    assert_eq!(store.last_turns(&session, 0)?, []);
    assert_eq!(store.last_turns(&session, 9)?, all);
    assert_eq!(store.turns(&session, 2..)?, of_turns(2..=4));
    assert_eq!(store.turns(&session, 1..=3)?, of_turns(1..=3));
    assert_eq!(store.turns(&session, 1..3)?, of_turns(1..=2));
    let (high, low) = (3, 1);
    assert_eq!(
        store.turns(&session, high..=low)?,
        [],
        "a reversed range is empty"
    );
    assert_eq!(store.turns(&session, 7..)?, []);
    assert_eq!(store.turns(&session, ..)?, all);
    Ok(())
}
