//! The transcript as one self-contained HTML page: inline CSS, no script, nothing fetched
//! (a Content-Security-Policy that allows no source says so to the browser too). Every
//! stored string goes through [`escape`], and only through it; long results and reasoning
//! fold with `<details>`.

use std::fmt::Write;

use super::{
    is_long, layout, lineage, pretty, role_name, total_usage_line, turn_count, usage_line, when,
    Answer, Block, Call, Entry, Outcome, Shown, Transcript,
};
use crate::history::compaction::Summary;

/// The page's style: roles told apart by colour, code and JSON in monospace.
const STYLE: &str = include_str!("transcript.css");

/// The whole page.
pub fn html(transcript: &Transcript<'_>) -> String {
    let mut page = String::with_capacity(4096 + transcript.messages.len() * 512);
    let title = transcript
        .title
        .filter(|t| !t.trim().is_empty())
        .map_or_else(|| format!("Session {}", transcript.session), str::to_owned);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n",
    );
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(page, "<title>{}</title>", escape(&title));
    let _ = writeln!(page, "<style>\n{STYLE}</style>\n</head>\n<body>\n<main>");
    header(&mut page, transcript, &title);
    let mut open_turn = false;
    for entry in layout(transcript) {
        match entry {
            Entry::Turn(turn) => {
                if open_turn {
                    page.push_str("</section>\n");
                }
                open_turn = true;
                let _ = writeln!(
                    page,
                    "<section class=\"turn\">\n<h2 class=\"turn-head\"><span>Turn {turn}</span></h2>"
                );
            }
            Entry::Message(shown) => message(&mut page, &shown),
            Entry::Summary(summary) => summary_box(&mut page, summary),
        }
    }
    if open_turn {
        page.push_str("</section>\n");
    }
    page.push_str("</main>\n</body>\n</html>\n");
    page
}

/// `text` with every character that means something in HTML replaced by its reference: the
/// one escape for element content and attribute values alike.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A NUL would become U+FFFD in the parser; say so in the text.
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The page header: title, id, counts, the session's total usage.
fn header(page: &mut String, transcript: &Transcript<'_>, title: &str) {
    let _ = writeln!(page, "<header class=\"page\">\n<h1>{}</h1>", escape(title));
    let messages = transcript.messages;
    let mut facts = vec![
        format!("<code>{}</code>", escape(transcript.session.as_str())),
        format!("{} messages", messages.len()),
        format!("{} turns", turn_count(messages)),
    ];
    if let (Some(first), Some(last)) = (messages.first(), messages.last()) {
        facts.push(format!(
            "{} – {}",
            escape(&when(&first.created_at)),
            escape(&when(&last.created_at))
        ));
    }
    if let Some(line) = total_usage_line(transcript.usage) {
        facts.push(format!("tokens: {}", escape(&line)));
    }
    if !transcript.summaries.is_empty() {
        facts.push(format!("{} compaction(s)", transcript.summaries.len()));
    }
    if let Some(line) = lineage(transcript) {
        facts.push(escape(&line));
    }
    let _ = writeln!(
        page,
        "<p class=\"facts\">{}</p>\n</header>",
        facts.join(" <span class=\"sep\">·</span> ")
    );
}

/// One message card.
fn message(page: &mut String, shown: &Shown<'_>) {
    let message = shown.message;
    let role = message.role.as_str();
    let compacted = if message.compacted { " compacted" } else { "" };
    let _ = writeln!(
        page,
        "<article class=\"msg {role}{compacted}\" id=\"seq-{}\">",
        message.seq
    );
    let _ = write!(
        page,
        "<div class=\"head\"><span class=\"role\">{}</span><time datetime=\"{}\">{}</time>",
        role_name(message.role),
        escape(&message.created_at.to_rfc3339()),
        escape(&when(&message.created_at))
    );
    if let Some(model) = &message.model {
        let _ = write!(page, "<span class=\"pill model\">{}</span>", escape(model));
    }
    if let Some(line) = shown.usage.and_then(usage_line) {
        let _ = write!(page, "<span class=\"pill usage\">{}</span>", escape(&line));
    }
    if message.compacted {
        page.push_str(
            "<span class=\"badge compacted\" title=\"replaced by a summary in what the provider \
             sees\">compacted</span>",
        );
    }
    page.push_str("</div>\n");
    for block in &shown.blocks {
        block_html(page, block);
    }
    if shown.blocks.is_empty() {
        page.push_str("<p class=\"note\">(no content)</p>\n");
    }
    page.push_str("</article>\n");
}

/// One block of a message.
fn block_html(page: &mut String, block: &Block<'_>) {
    match block {
        Block::Text(text) if text.trim().is_empty() => {
            page.push_str("<p class=\"note\">(empty text)</p>\n");
        }
        Block::Text(text) => {
            let _ = writeln!(page, "<div class=\"text\">{}</div>", escape(text));
        }
        Block::Reasoning(text) => {
            let _ = writeln!(
                page,
                "<details class=\"reasoning\"><summary>Reasoning <span class=\"dim\">({} \
                 characters)</span></summary><div class=\"text\">{}</div></details>",
                text.chars().count(),
                escape(text)
            );
        }
        Block::Described(text) => {
            let _ = writeln!(page, "<div class=\"described\">{}</div>", escape(text));
        }
        Block::Call(call) => call_html(page, call),
        Block::Stray(answer) => {
            page.push_str("<div class=\"call stray\">\n");
            answer_html(page, answer);
            page.push_str("</div>\n");
        }
    }
}

/// A call with its outcome beside it.
fn call_html(page: &mut String, call: &Call<'_>) {
    let class = match &call.outcome {
        Outcome::Answered(answer) if answer.tombstone => " tombstoned",
        Outcome::Answered(answer) if answer.is_error => " failed",
        Outcome::Answered(_) => "",
        Outcome::Pending => " pending",
        Outcome::Unanswered | Outcome::Unanswerable => " unanswered",
    };
    let _ = writeln!(page, "<div class=\"call{class}\">");
    let kind = if call.server { "server tool" } else { "tool" };
    let _ = writeln!(
        page,
        "<div class=\"call-head\"><span class=\"kind\">{kind}</span><span \
         class=\"name\">{}</span><code class=\"id\">{}</code></div>",
        escape(call.name),
        escape(call.id)
    );
    let input = pretty(call.input);
    let _ = writeln!(page, "<pre class=\"input\">{}</pre>", escape(&input));
    match &call.outcome {
        Outcome::Answered(answer) => answer_html(page, answer),
        Outcome::Pending => page.push_str(
            "<div class=\"result\"><span class=\"badge pending\">pending</span> no result \
             yet</div>\n",
        ),
        Outcome::Unanswered => page.push_str(
            "<div class=\"result\"><span class=\"badge missing\">no result</span> the \
             conversation moved on without one</div>\n",
        ),
        Outcome::Unanswerable => page.push_str(
            "<div class=\"result\"><span class=\"badge missing\">no result</span> nothing can \
             answer this call</div>\n",
        ),
    }
    page.push_str("</div>\n");
}

/// A result: a label, then its content (folded when long).
fn answer_html(page: &mut String, answer: &Answer) {
    let mut label = String::from("result");
    if answer.tombstone {
        label = "<span class=\"badge tombstone\">tombstone</span> cancelled".to_owned();
    } else if answer.is_error {
        label = "<span class=\"badge error\">error</span> result".to_owned();
    }
    if let Some(note) = answer.note {
        let _ = write!(
            label,
            " <span class=\"dim\">for <code>{}</code>, {}</span>",
            escape(&answer.tool_use_id),
            escape(note)
        );
    }
    let content = &answer.content;
    let body = if content.is_empty() {
        "<p class=\"note\">(empty)</p>".to_owned()
    } else {
        format!("<pre class=\"output\">{}</pre>", escape(content))
    };
    if is_long(content) {
        let _ = writeln!(
            page,
            "<details class=\"result\"><summary>{label} <span class=\"dim\">({} lines, {} \
             bytes)</span></summary>{body}</details>",
            content.lines().count(),
            content.len()
        );
    } else {
        let _ = writeln!(
            page,
            "<div class=\"result\"><div class=\"result-head\">{label}</div>{body}</div>"
        );
    }
}

/// A compaction summary, where the head it replaces ends (folded when long).
fn summary_box(page: &mut String, summary: &Summary) {
    let _ = write!(
        page,
        "<aside class=\"summary\"><div class=\"head\"><span class=\"badge compaction\">compaction \
         summary</span> replaces turns {}–{} in what the provider sees <time datetime=\"{}\">{}\
         </time></div>",
        summary.first_turn,
        summary.last_turn,
        escape(&summary.created_at.to_rfc3339()),
        escape(&when(&summary.created_at)),
    );
    let text = format!("<div class=\"text\">{}</div>", escape(&summary.text));
    if is_long(&summary.text) {
        let _ = write!(
            page,
            "<details><summary>the summary ({} lines)</summary>{text}</details>",
            summary.text.lines().count()
        );
    } else {
        page.push_str(&text);
    }
    page.push_str("</aside>\n");
}
