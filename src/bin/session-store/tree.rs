//! `sessions --tree [--json]`: every session under the session it was forked from.

use std::io::Write;

use session_store::Store;

pub fn run(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let lineage = store.lineage()?;
    if json {
        // `[{"id", "parent", "forked_at_turn", "depth"}]`, in the tree's order.
        return crate::shapes::print(out, &serde_json::to_value(&lineage)?);
    }
    for node in lineage {
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
