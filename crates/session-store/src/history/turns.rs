//! Turn boundaries: a turn starts at each `user` message and runs to the next one.
//!
//! Messages before the first user message belong to turn 0, and so does the first user
//! message: the contract defines `turn_index = max(u - 1, 0)` where `u` counts the user
//! messages up to and including the message. A cut is valid only at a user message that opens
//! a turn, because then no tool_use before the cut is answered after it.

use crate::model::Role;

/// The contract's `turn_index` for each message of a session, given their roles in `seq` order.
///
/// ```
/// use session_store::turn_indexes;
/// use session_store::Role::*;
/// assert_eq!(turn_indexes([System, User, Assistant, User, Assistant, Tool]), vec![0, 0, 0, 1, 1, 1]);
/// ```
pub fn turn_indexes(roles: impl IntoIterator<Item = Role>) -> Vec<i64> {
    let mut users = 0i64;
    roles
        .into_iter()
        .map(|role| {
            if role == Role::User {
                users += 1;
            }
            (users - 1).max(0)
        })
        .collect()
}

/// The turn index of a message appended after a session whose last user message had
/// `last_user_turn` (`None` when the session has no user message yet).
pub fn next_turn_index(last_user_turn: Option<i64>, role: Role) -> i64 {
    match (last_user_turn, role) {
        (None, _) => 0,
        (Some(turn), Role::User) => turn + 1,
        (Some(turn), _) => turn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Role::*;

    #[test]
    fn messages_before_the_first_user_message_are_turn_zero() {
        assert_eq!(turn_indexes([System, Assistant, User]), vec![0, 0, 0]);
    }

    #[test]
    fn each_later_user_message_opens_the_next_turn() {
        assert_eq!(
            turn_indexes([User, Assistant, Tool, Assistant, User, User, Tool]),
            vec![0, 0, 0, 0, 1, 2, 2]
        );
    }

    #[test]
    fn next_turn_index_agrees_with_turn_indexes() {
        let roles = [System, User, Assistant, Tool, User, System, User, Assistant];
        let expected = turn_indexes(roles);
        let mut last_user_turn = None;
        for (role, want) in roles.into_iter().zip(expected) {
            let got = next_turn_index(last_user_turn, role);
            assert_eq!(got, want);
            if role == User {
                last_user_turn = Some(got);
            }
        }
    }
}
