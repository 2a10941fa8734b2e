//! Which conversation each line of a Claude Code log belongs to, read from the tree its
//! `parentUuid` links make. Pure: the lines' links in, a [`Plan`] out.
//!
//! Claude Code appends every line to one file, and a rewind (double Esc, "restore to an
//! earlier message") or an edited earlier prompt writes a new branch hanging off an earlier
//! `uuid` of the same file. Claude Code itself resumes the conversation that ends at the
//! latest leaf, walking `parentUuid` back to the root; the other branches are still in the
//! file, never sent with it. So:
//!
//! - **The main conversation** is the chain from the latest leaf (the last message line, in
//!   file order, of the file's session: the `sessionId` of its first message line) back to
//!   its root, as Claude Code rebuilds it: a `compact_boundary` (whose `parentUuid` is null)
//!   continues the message it compacted (the parent of its preserved segment's head, else its
//!   `logicalParentUuid`, else the message line before it), and the lines the single-parent
//!   walk misses are taken back as Claude Code's `recoverOrphanedParallelToolResults` does:
//!   the other lines of each assistant message on the chain (parallel `tool_use` lines share
//!   `message.id`) and the `tool_result` lines hanging off any of them.
//! - **Every other leaf** is an abandoned branch: its own conversation, from its root, which
//!   shares its first lines with the conversation it left ([`Planned::fork`]); or, when it
//!   shares no line with any (another session's lines, with a root of their own), a
//!   conversation of its own. Nothing is left out.
//! - A **partial compaction** keeps messages after its summary
//!   (`compactMetadata.preservedMessages.uuids`, or the `preservedSegment` walked from its
//!   tail to its head): they are fed right after the summary line, in their order, so they
//!   stay visible after the compaction as Claude Code sends them.
//!
//! A conversation's lines are fed in file order (parents are written before their children,
//! so file order is chain order), but for the preserved messages moved after their summary.
//! A link to a line that is not earlier in the file is not followed (no line can be its own
//! ancestor). A message line without a `uuid` cannot be resumed from: it goes with the
//! conversation of its parent. A log in which no line names a parent (hand-written, or
//! written by another tool) is one conversation in file order.

use std::collections::{HashMap, HashSet};

/// One line of the log that takes part in the tree (not a sidechain line, not a repeated
/// `uuid`), with what the plan reads of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Node {
    /// 1-based line number.
    pub(crate) line: usize,
    /// `uuid`.
    pub(crate) uuid: Option<String>,
    /// `parentUuid` (`None` when absent or null).
    pub(crate) parent: Option<String>,
    /// A `user` or `assistant` line.
    pub(crate) message: bool,
    /// An `assistant` line.
    pub(crate) assistant: bool,
    /// `sessionId`.
    pub(crate) session: Option<String>,
    /// An assistant line's `message.id`.
    pub(crate) message_id: Option<String>,
    /// A user line holding a `tool_result` block.
    pub(crate) tool_result: bool,
    /// A `user` line with `isCompactSummary`.
    pub(crate) compact_summary: bool,
    /// Set on a `system`/`compact_boundary` line.
    pub(crate) boundary: Option<Boundary>,
}

/// What a `compact_boundary` line says of the conversation it compacted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Boundary {
    /// `logicalParentUuid`: the last message before the compaction.
    pub(crate) logical_parent: Option<String>,
    /// `compactMetadata.preservedMessages.uuids`, in order.
    pub(crate) preserved: Vec<String>,
    /// `compactMetadata.preservedSegment`: its head and tail.
    pub(crate) segment: Option<(String, String)>,
}

/// The conversations of a log, the main one first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The conversations; a line may belong to several (the lines a branch shares).
    pub(crate) conversations: Vec<Planned>,
}

/// One conversation of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Planned {
    /// Its message lines, in the order they are fed.
    pub(crate) lines: Vec<usize>,
    /// Where it branches off another conversation of the plan; `None` for the main one and
    /// for one with a root of its own.
    pub(crate) fork: Option<Fork>,
}

/// Where a branch leaves the conversation it shares its first lines with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fork {
    /// The conversation it left (an index of [`Plan::conversations`], always smaller).
    pub(crate) parent: usize,
    /// How many of its first [`Planned::lines`] it shares with it.
    pub(crate) shared: usize,
}

impl Plan {
    /// One conversation of every message line in file order: the plan of a log whose lines
    /// make no tree.
    fn in_file_order(nodes: &[Node]) -> Plan {
        Plan {
            conversations: vec![Planned {
                lines: nodes.iter().filter(|n| n.message).map(|n| n.line).collect(),
                fork: None,
            }],
        }
    }
}

/// The plan of a log whose tree-taking lines are `nodes`, in file order.
pub(crate) fn plan(nodes: &[Node]) -> Plan {
    if !nodes.iter().any(|n| n.parent.is_some()) {
        return Plan::in_file_order(nodes);
    }
    let tree = Tree::of(nodes);
    let file_session = nodes
        .iter()
        .filter(|n| n.message)
        .find_map(|n| n.session.as_deref());
    let of_file = |n: &Node| match (file_session, n.session.as_deref()) {
        (Some(file), Some(own)) => file == own,
        _ => true,
    };
    let Some(main_leaf) = nodes
        .iter()
        .rposition(|n| n.message && n.uuid.is_some() && of_file(n))
    else {
        return Plan::in_file_order(nodes);
    };
    // The conversation that first took each node.
    let mut owner: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut sets: Vec<Vec<usize>> = Vec::new();
    let mut forks: Vec<Option<usize>> = Vec::new();
    let mut leaf = Some(main_leaf);
    while let Some(start) = leaf {
        let k = sets.len();
        let chain = tree.chain(start);
        // The last node of the chain that an earlier conversation took is where this one
        // leaves it; none for the main one or one with a root of its own.
        let left = chain.iter().find_map(|&i| owner[i]);
        let set = tree.conversation(&chain);
        for &i in &set {
            owner[i].get_or_insert(k);
        }
        sets.push(set);
        forks.push(left);
        leaf = (0..nodes.len())
            .rev()
            .find(|&i| nodes[i].message && nodes[i].uuid.is_some() && owner[i].is_none());
    }
    // A message line without a uuid goes with its parent's conversation (the main one when
    // its parent is in none).
    for (i, node) in nodes.iter().enumerate() {
        if node.message && node.uuid.is_none() && owner[i].is_none() {
            let k = tree.parent[i].and_then(|p| owner[p]).unwrap_or(0);
            owner[i] = Some(k);
            sets[k].push(i);
        }
    }
    let conversations = sets
        .iter()
        .zip(&forks)
        .map(|(set, fork)| {
            let lines = tree.feed_order(set);
            let fork = fork.map(|parent| {
                let parent_set: HashSet<usize> = sets[parent].iter().copied().collect();
                let shared = lines.iter().take_while(|&i| parent_set.contains(i)).count();
                Fork { parent, shared }
            });
            Planned {
                lines: lines.iter().map(|&i| nodes[i].line).collect(),
                fork,
            }
        })
        .collect();
    Plan { conversations }
}

/// The links between the nodes, by index.
struct Tree<'a> {
    nodes: &'a [Node],
    /// Each node's parent, always an earlier node.
    parent: Vec<Option<usize>>,
    /// The assistant lines of each `message.id`.
    siblings: HashMap<&'a str, Vec<usize>>,
    /// The `tool_result` lines hanging off each node.
    results: HashMap<usize, Vec<usize>>,
    /// Each boundary's preserved nodes, in their order.
    preserved: HashMap<usize, Vec<usize>>,
}

impl<'a> Tree<'a> {
    fn of(nodes: &'a [Node]) -> Self {
        let mut by_uuid: HashMap<&str, usize> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Some(uuid) = node.uuid.as_deref() {
                by_uuid.entry(uuid).or_insert(i);
            }
        }
        let find = |uuid: Option<&str>, before: usize| {
            uuid.and_then(|u| by_uuid.get(u).copied())
                .filter(|&p| p < before)
        };
        let mut parent = Vec::with_capacity(nodes.len());
        let mut preserved = HashMap::new();
        let mut last_message = None;
        for (i, node) in nodes.iter().enumerate() {
            let link = match &node.boundary {
                None => find(node.parent.as_deref(), i),
                Some(boundary) => {
                    let kept = preserved_of(nodes, &by_uuid, boundary);
                    // The compacted conversation ends before the kept messages begin.
                    let head_parent = kept
                        .first()
                        .and_then(|&h| find(nodes[h].parent.as_deref(), h));
                    if !kept.is_empty() {
                        preserved.insert(i, kept);
                    }
                    head_parent
                        .or_else(|| find(node.parent.as_deref(), i))
                        .or_else(|| find(boundary.logical_parent.as_deref(), i))
                        .or(last_message)
                }
            };
            parent.push(link);
            if node.message {
                last_message = Some(i);
            }
        }
        let mut siblings: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut results: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Some(id) = node.message_id.as_deref().filter(|_| node.assistant) {
                siblings.entry(id).or_default().push(i);
            }
            if node.tool_result {
                if let Some(p) = parent[i] {
                    results.entry(p).or_default().push(i);
                }
            }
        }
        Tree {
            nodes,
            parent,
            siblings,
            results,
            preserved,
        }
    }

    /// The chain from `leaf` back to its root, leaf first.
    fn chain(&self, leaf: usize) -> Vec<usize> {
        let mut chain = vec![leaf];
        let mut at = leaf;
        while let Some(p) = self.parent[at] {
            chain.push(p);
            at = p;
        }
        chain
    }

    /// The nodes of the conversation whose chain is `chain`: the chain, the lines of its
    /// assistant messages the walk missed and their results, and its boundaries' kept
    /// messages (with their results).
    fn conversation(&self, chain: &[usize]) -> Vec<usize> {
        let mut set: HashSet<usize> = chain.iter().copied().collect();
        let add = |i: usize, set: &mut HashSet<usize>| {
            set.insert(i);
            for &r in self.results.get(&i).into_iter().flatten() {
                set.insert(r);
            }
        };
        for &i in chain {
            if let Some(id) = self.nodes[i].message_id.as_deref() {
                for &s in self.siblings.get(id).into_iter().flatten() {
                    add(s, &mut set);
                }
            }
            for &k in self.preserved.get(&i).into_iter().flatten() {
                add(k, &mut set);
            }
        }
        let mut set: Vec<usize> = set.into_iter().collect();
        set.sort_unstable();
        set
    }

    /// The message nodes of `set` in the order they are fed: file order, but for each
    /// boundary's kept messages, moved right after its summary.
    fn feed_order(&self, set: &[usize]) -> Vec<usize> {
        let mut order: Vec<usize> = set
            .iter()
            .copied()
            .filter(|&i| self.nodes[i].message)
            .collect();
        order.sort_unstable();
        for &b in set {
            let Some(kept) = self.preserved.get(&b) else {
                continue;
            };
            let Some(summary) = order
                .iter()
                .copied()
                .find(|&i| i > b && self.nodes[i].compact_summary)
            else {
                continue;
            };
            // Each kept message, then the results answering it.
            let mut moved = Vec::new();
            for &k in kept {
                if order.contains(&k) {
                    moved.push(k);
                }
                for &r in self.results.get(&k).into_iter().flatten() {
                    if order.contains(&r) && !moved.contains(&r) {
                        moved.push(r);
                    }
                }
            }
            order.retain(|i| !moved.contains(i));
            let Some(at) = order.iter().position(|&i| i == summary) else {
                continue;
            };
            order.splice(at + 1..at + 1, moved);
        }
        order
    }
}

/// A boundary's kept messages, in their order: the uuids listed, else the segment walked
/// from its tail to its head (none when the walk does not reach the head, as Claude Code
/// fails closed).
fn preserved_of(nodes: &[Node], by_uuid: &HashMap<&str, usize>, boundary: &Boundary) -> Vec<usize> {
    if !boundary.preserved.is_empty() {
        let kept: Option<Vec<usize>> = boundary
            .preserved
            .iter()
            .map(|u| by_uuid.get(u.as_str()).copied())
            .collect();
        return kept.unwrap_or_default();
    }
    let Some((head, tail)) = &boundary.segment else {
        return Vec::new();
    };
    let mut walked = Vec::new();
    let mut at = by_uuid.get(tail.as_str()).copied();
    while let Some(i) = at {
        if walked.contains(&i) {
            return Vec::new();
        }
        walked.push(i);
        if nodes[i].uuid.as_deref() == Some(head.as_str()) {
            walked.reverse();
            return walked;
        }
        at = nodes[i]
            .parent
            .as_deref()
            .and_then(|p| by_uuid.get(p).copied());
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(line: usize, uuid: &str, parent: Option<&str>) -> Node {
        Node {
            line,
            uuid: Some(uuid.to_owned()),
            parent: parent.map(str::to_owned),
            message: true,
            session: Some("s".to_owned()),
            ..Node::default()
        }
    }

    fn lines(plan: &Plan) -> Vec<Vec<usize>> {
        plan.conversations.iter().map(|c| c.lines.clone()).collect()
    }

    #[test]
    fn a_log_without_links_is_one_conversation_in_file_order() {
        let nodes = [node(1, "a", None), node(2, "b", None), node(3, "c", None)];
        assert_eq!(lines(&plan(&nodes)), [vec![1, 2, 3]]);
    }

    #[test]
    fn a_rewind_makes_the_latest_leaf_main_and_the_other_branch_a_fork() {
        let nodes = [
            node(1, "u1", None),
            node(2, "a1", Some("u1")),
            node(3, "u2a", Some("a1")),
            node(4, "a2a", Some("u2a")),
            node(5, "u2b", Some("a1")),
            node(6, "a2b", Some("u2b")),
        ];
        let plan = plan(&nodes);
        assert_eq!(lines(&plan), [vec![1, 2, 5, 6], vec![1, 2, 3, 4]]);
        assert_eq!(plan.conversations[0].fork, None);
        assert_eq!(
            plan.conversations[1].fork,
            Some(Fork {
                parent: 0,
                shared: 2
            })
        );
    }

    #[test]
    fn parallel_tool_lines_off_the_walk_stay_in_the_conversation() {
        let mut a = node(2, "a", Some("u1"));
        let mut b = node(3, "b", Some("a"));
        for n in [&mut a, &mut b] {
            n.assistant = true;
            n.message_id = Some("msg".to_owned());
        }
        let mut ra = node(4, "ra", Some("a"));
        let mut rb = node(5, "rb", Some("b"));
        ra.tool_result = true;
        rb.tool_result = true;
        let nodes = [node(1, "u1", None), a, b, ra, rb, node(6, "u2", Some("rb"))];
        let plan = plan(&nodes);
        assert_eq!(lines(&plan), [vec![1, 2, 3, 4, 5, 6]]);
    }

    #[test]
    fn another_sessions_root_is_a_conversation_of_its_own() {
        let mut other = node(3, "o1", None);
        other.session = Some("other".to_owned());
        let mut reply = node(5, "o2", Some("o1"));
        reply.session = Some("other".to_owned());
        let nodes = [
            node(1, "u1", None),
            node(2, "a1", Some("u1")),
            other,
            node(4, "u2", Some("a1")),
            reply,
        ];
        let plan = plan(&nodes);
        assert_eq!(lines(&plan), [vec![1, 2, 4], vec![3, 5]]);
        assert_eq!(plan.conversations[1].fork, None);
    }

    #[test]
    fn a_link_forward_or_in_a_circle_is_not_followed() {
        let nodes = [node(1, "a", Some("b")), node(2, "b", Some("a"))];
        assert_eq!(lines(&plan(&nodes)), [vec![1, 2]]);
    }

    #[test]
    fn kept_messages_of_a_partial_compaction_follow_its_summary() {
        let boundary = Node {
            line: 4,
            uuid: Some("cb".to_owned()),
            boundary: Some(Boundary {
                logical_parent: Some("k2".to_owned()),
                preserved: vec!["k1".to_owned(), "k2".to_owned()],
                segment: None,
            }),
            ..Node::default()
        };
        let mut summary = node(5, "cs", Some("cb"));
        summary.compact_summary = true;
        let nodes = [
            node(1, "u1", None),
            node(2, "k1", Some("u1")),
            node(3, "k2", Some("k1")),
            boundary,
            summary,
            node(6, "u2", Some("cs")),
        ];
        assert_eq!(lines(&plan(&nodes)), [vec![1, 5, 2, 3, 6]]);
    }
}
