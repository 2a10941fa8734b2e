//! Progress for long operations, on stderr and only when stderr is a terminal: a person
//! waiting on a 78 s import sees it move, a script piping the output sees nothing (indicatif,
//! hidden unless [`std::io::IsTerminal`] says stderr is one).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// How often a spinner redraws.
const TICK: Duration = Duration::from_millis(120);

/// True when progress may be drawn: stderr is a terminal.
pub fn shown() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar over `len` bytes of input (`what` says which pass), hidden when piped.
pub fn bytes(what: &str, len: u64) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    // Dropped early (an error returned with `?`), it clears itself as well.
    let bar = ProgressBar::new(len).with_finish(ProgressFinish::AndClear);
    let template = format!("{what} {{bar:40}} {{bytes}}/{{total_bytes}} {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// A spinner saying `what` is under way, for work without a known length; hidden when
/// piped. Cleared when finished or dropped.
pub fn spinner(what: &str) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear);
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(TICK);
    bar
}
