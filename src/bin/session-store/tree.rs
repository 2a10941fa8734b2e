//! `sessions --tree`: every session under the session it was forked from.

use std::io::Write;

use session_store::Store;

pub fn run(store: &Store, out: &mut impl Write) -> anyhow::Result<()> {
    for node in store.lineage()? {
        let indent = "  ".repeat(node.depth);
        match node.forked_at_turn {
            Some(turn) if node.parent.is_some() => {
                writeln!(out, "{indent}{}\tforked_at_turn={turn}", node.id)?
            }
            // A fork whose parent was deleted: it is a root now, but says it was a fork.
            Some(turn) => writeln!(
                out,
                "{indent}{}\tforked_at_turn={turn}\tparent=deleted",
                node.id
            )?,
            None => writeln!(out, "{indent}{}", node.id)?,
        }
    }
    Ok(())
}
