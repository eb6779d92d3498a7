//! An ISM's tool actions, carried out: the schema a selection is shown, the call through
//! `crate::tools` (which refuses what may not run and never sends invalid arguments), the
//! call counted, and what the loop's log keeps of it. What a tool returns is untrusted text:
//! it goes only into the log (where the prompt fences it) and working memory's record of the
//! iteration, never into the user model, the soul state or a whisper.

use super::model::Caller;
use crate::ism::{Ism, ToolCall};
use crate::tools::{self, Called, Outcome};

impl Caller<'_> {
    /// Each tool action's arguments as a selection is shown them (action, schema), after
    /// waiting for the servers they need that are still starting.
    pub(super) async fn tool_schemas<'i>(&self, ism: &'i Ism) -> Vec<(&'i str, String)> {
        if let Some(t) = &self.tools {
            let mut servers: Vec<&str> = ism.tools().map(|(_, s, _)| s).collect();
            servers.sort_unstable();
            servers.dedup();
            for s in servers {
                t.settle(s).await;
            }
        }
        ism.tools()
            .map(|(a, server, tool)| (a.name.as_str(), self.tool_schema(server, tool)))
            .collect()
    }

    /// The tool's arguments as a selection is shown them, or why it cannot be called now.
    fn tool_schema(&self, server: &str, tool: &str) -> String {
        match self.tools.as_ref().map(|t| t.tool(server, tool)) {
            Some(Ok(info)) => tools::schema::compact(&info.input_schema),
            Some(Err((_, why))) => format!("unknown now: {why}"),
            None => "unknown now: no tool servers are configured".into(),
        }
    }

    /// Calls `server.tool` with the arguments the selection gave, counted.
    pub(super) async fn call_tool(
        &self,
        action: &str,
        server: &str,
        tool: &str,
        arguments: Option<&str>,
    ) -> (ToolCall, String) {
        let called = match &self.tools {
            Some(t) => t.call(server, tool, arguments).await,
            None => Called {
                outcome: Outcome::Unavailable,
                text: "no tool servers are configured ([[tools.servers]])".into(),
                arguments: arguments.unwrap_or("").trim().to_string(),
                ms: 0,
            },
        };
        if let Some(m) = &self.metrics {
            m.tool_call(
                server,
                tool,
                called.outcome.word(),
                called.outcome.sent(),
                called.ms,
            );
        }
        let account = match called.outcome {
            Outcome::Ok => called.text.clone(),
            Outcome::ToolError => format!("the tool reported an error: {}", called.text),
            other => format!("[{}] {}", other.word(), called.text),
        };
        let call = ToolCall {
            action: action.to_string(),
            tool: format!("{server}.{tool}"),
            arguments: tools::cut(&called.arguments, 2000),
            outcome: called.outcome.word().to_string(),
            ms: called.ms,
        };
        (call, account)
    }
}
