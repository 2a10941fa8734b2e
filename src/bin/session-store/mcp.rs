//! `mcp`: a Model Context Protocol server on stdio, over the official Rust SDK (`rmcp`).
//!
//! A thin layer over library calls: `list_sessions`, `search`, `show` (whole turns, a window
//! of them) and `export`; `fork` only with `--allow-writes`. Read-only by default: the
//! database is opened without write access ([`StoreOptions::read_only`]), so no migration,
//! no index catch-up and no thinking latch ever touches the file, and the tool that writes is
//! not even listed. Errors: a tool that is not offered is a JSON-RPC error (-32602); a tool
//! that fails (arguments that do not fit its schema, an unknown session, a turn range outside
//! the session) answers a result with `isError` and the reason as text, so the model reading
//! it can correct itself. Each tool's result is JSON, both as
//! `structuredContent` and as the text of its one content block: the shapes of `--json`
//! (`shapes.rs`). The library is synchronous: each call runs on tokio's blocking pool.

use std::path::Path;

use anyhow::Context;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::schemars::{self, JsonSchema};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use session_store::{Provider, SearchOptions, Store, StoreOptions};

use crate::{export, open, shapes};

/// The most turns one `show` call returns.
const MAX_WINDOW: i64 = 100;
/// Turns `show` returns when the call does not say.
const DEFAULT_WINDOW: i64 = 10;
/// Sessions `list_sessions` returns when the call does not say.
const DEFAULT_LIST: usize = 100;

/// Runs the server on stdin/stdout until the client closes it.
pub fn run(db: &Path, allow_writes: bool) -> anyhow::Result<()> {
    let store = if allow_writes {
        open::existing(&Some(db.to_path_buf()))?
    } else {
        open_read_only(db)?
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    runtime.block_on(async move {
        let server = Server::new(store, allow_writes);
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .context("MCP initialisation failed")?;
        running.waiting().await.context("MCP server stopped")?;
        anyhow::Ok(())
    })
}

/// The database without write access: a missing file, or one whose schema is not current,
/// is refused rather than created or migrated.
fn open_read_only(db: &Path) -> anyhow::Result<Store> {
    if !session_store::is_database_url(&db.to_string_lossy()) && !db.exists() {
        anyhow::bail!("no database at {}", db.display());
    }
    let options = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    Store::open_with(db, &options)
        .with_context(|| format!("cannot open {} read-only", open::shown(db)))
}

/// The server: the store and the tools this run offers.
#[derive(Clone)]
pub struct Server {
    store: Store,
    allow_writes: bool,
    tool_router: ToolRouter<Self>,
}

/// `list_sessions` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// At most this many sessions, oldest first (default 100).
    #[serde(default)]
    limit: Option<usize>,
    /// Skip this many sessions first (default 0).
    #[serde(default)]
    offset: Option<usize>,
}

/// `search` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Words to find (all of them); a trailing `*` searches a prefix.
    query: String,
    /// Only this session (its id, or a unique prefix of 8 characters or more).
    #[serde(default)]
    session: Option<String>,
    /// At most this many hits, best first (default 20).
    #[serde(default)]
    limit: Option<usize>,
}

/// `show` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowArgs {
    /// The session id, or a unique prefix of 8 characters or more.
    session: String,
    /// The first turn returned (default 0).
    #[serde(default)]
    from_turn: Option<i64>,
    /// How many whole turns (default 10, at most 100); `next_turn` in the result says where
    /// the next window starts.
    #[serde(default)]
    turns: Option<i64>,
}

/// `export` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportArgs {
    /// The session id, or a unique prefix of 8 characters or more.
    session: String,
    /// The request shape: `anthropic`, `openai`, `responses` or `gemini`.
    format: String,
    /// The model the body is for, as `provider/model`; default: the model of the session's
    /// latest assistant message.
    #[serde(default)]
    model: Option<String>,
}

/// `fork` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkArgs {
    /// The session to fork (its id, or a unique prefix of 8 characters or more).
    session: String,
    /// The first turn not copied: 0 copies nothing, the number of turns copies all.
    at_turn: i64,
}

#[tool_router]
impl Server {
    fn new(store: Store, allow_writes: bool) -> Self {
        let mut tool_router = Self::tool_router();
        if !allow_writes {
            tool_router.remove_route("fork");
        }
        Self {
            store,
            allow_writes,
            tool_router,
        }
    }

    /// Runs `f` on the blocking pool; its error becomes a tool result with `isError`.
    async fn call(
        &self,
        f: impl FnOnce(&Store) -> anyhow::Result<Value> + Send + 'static,
    ) -> Result<CallToolResult, ErrorData> {
        let store = self.store.clone();
        let outcome = tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("the tool did not finish: {e}"), None)
            })?;
        Ok(match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!("{error:#}"))]),
        })
    }

    #[tool(
        description = "The sessions of the database, oldest first: id, title, created_at, updated_at, messages, turns, compacted_turns and pending tool calls. Pages with limit/offset; `total` counts all."
    )]
    async fn list_sessions(
        &self,
        Parameters(args): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call(move |store| {
            let all = store.session_overviews()?;
            let total = all.len();
            let offset = args.offset.unwrap_or(0);
            let sessions: Vec<Value> = all
                .iter()
                .skip(offset)
                .take(args.limit.unwrap_or(DEFAULT_LIST))
                .map(shapes::overview)
                .collect();
            Ok(json!({"total": total, "offset": offset, "sessions": sessions}))
        })
        .await
    }

    #[tool(
        description = "Full-text search over the text, reasoning, tool inputs and tool results of every session (or one), best match first: session, turn, seq, role, kind and a snippet per hit. Use `show` with the hit's turn to read it whole. A read-only server searches what the full-text index holds: when `index_behind` is true, parts written since the index was last updated are not found (one `session-store search` with write access brings it up to date)."
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call(move |store| {
            let session = args
                .session
                .as_deref()
                .map(|s| open::session(store, s))
                .transpose()?;
            let options = SearchOptions {
                session,
                limit: args.limit.unwrap_or(SearchOptions::default().limit),
                ..SearchOptions::default()
            };
            let hits = store.search(&args.query, &options)?;
            Ok(json!({"hits": hits, "index_behind": store.search_index_behind()?}))
        })
        .await
    }

    #[tool(
        description = "Whole turns of a session, a window of them: every message with all its parts (text, reasoning, tool calls and results), compacted ones marked. `turns` in the result counts the session's turns; `next_turn` is where the next window starts (null at the end)."
    )]
    async fn show(
        &self,
        Parameters(args): Parameters<ShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call(move |store| {
            let id = open::session(store, &args.session)?;
            let start = args.from_turn.unwrap_or(0);
            let count = args.turns.unwrap_or(DEFAULT_WINDOW);
            if start < 0 || !(1..=MAX_WINDOW).contains(&count) {
                anyhow::bail!(
                    "from_turn must be 0 or more and turns 1 to {MAX_WINDOW}, found {start} and {count}"
                );
            }
            let total = shapes::turn_count(store, &id)?;
            if start > 0 && start >= total {
                anyhow::bail!("session {id} has turns 0..{total}; from_turn {start} is past them");
            }
            shapes::turns(store, &id, start, Some(start.saturating_add(count)))
        })
        .await
    }

    #[tool(
        description = "The request body the store would send now for a session, in one provider's shape (format: anthropic, openai, responses or gemini), checked against that provider's rules. Pending tool calls are answered with tombstones in the body only (listed in `tombstoned`); nothing is stored."
    )]
    async fn export(
        &self,
        Parameters(args): Parameters<ExportArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.call(move |store| {
            let provider: Provider = args.format.parse().map_err(anyhow::Error::msg)?;
            let id = open::session(store, &args.session)?;
            let request = export::checked_request(store, &id, provider, args.model)?;
            let tombstoned = export::tombstoned(&request);
            Ok(json!({
                "session": id.as_str(),
                "format": provider.as_str(),
                "model": request.model,
                "tombstoned": tombstoned,
                "body": request.body,
            }))
        })
        .await
    }

    #[tool(
        description = "A new session holding the turns of a session before at_turn (calls pending at the cut are answered with tombstones); returns the new id. Only offered when the server runs with --allow-writes."
    )]
    async fn fork(
        &self,
        Parameters(args): Parameters<ForkArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if !self.allow_writes {
            return Err(ErrorData::invalid_request(
                "fork needs `session-store mcp --allow-writes`",
                None,
            ));
        }
        self.call(move |store| {
            let id = open::session(store, &args.session)?;
            Ok(shapes::forked(&store.fork(&id, args.at_turn)?))
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let access = if self.allow_writes {
            "Reads and forks"
        } else {
            "Reads (read-only)"
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "session-store",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "{access} the conversations stored in a session-store database: list_sessions, \
                 then search or show (whole turns) and export (a provider request body)."
            ))
    }
}
