//! The manifest against the code: every Web API method `src/slack/` calls and every event
//! type the intake matches on has its entry, and every entry is still used; then the
//! manifest's shape, and the YAML writer.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::yaml::{quoted, to_yaml};
use super::*;

/// slack-morphism's session calls anima makes, and the Web API method each is. A call
/// missing here fails the test: add it with its method (and the method to `METHODS`).
const MORPHISM_CALLS: &[(&str, &str)] = &[
    ("auth_test", "auth.test"),
    ("users_info", "users.info"),
    ("chat_post_message", "chat.postMessage"),
    ("chat_post_ephemeral", "chat.postEphemeral"),
    ("chat_update", "chat.update"),
    ("chat_start_stream", "chat.startStream"),
    ("chat_append_stream", "chat.appendStream"),
    ("chat_stop_stream", "chat.stopStream"),
    ("conversations_history", "conversations.history"),
    ("conversations_replies", "conversations.replies"),
    ("reactions_add", "reactions.add"),
    ("reactions_remove", "reactions.remove"),
    (
        "assistant_threads_set_status",
        "assistant.threads.setStatus",
    ),
    (
        "assistant_threads_set_suggested_prompts",
        "assistant.threads.setSuggestedPrompts",
    ),
    ("assistant_threads_set_title", "assistant.threads.setTitle"),
    ("agents_sessions_set_status", "agents.sessions.setStatus"),
];

/// slack-morphism calls made with the app-level token, not the bot's: their scope
/// (`connections:write`) is the token's own, which no manifest gives.
const APP_TOKEN_CALLS: &[(&str, &str)] = &[("apps_connections_open", "apps.connections.open")];

/// The code of one source file: the part before its test module, without comments, with
/// its string literals apart.
struct Code {
    file: String,
    /// The code with every string and char literal blanked out.
    text: String,
    strings: Vec<String>,
}

fn read_code(path: &Path) -> Code {
    let all = std::fs::read_to_string(path).unwrap();
    // The test module, not a `#[cfg(test)]` item among the code (api.rs has one).
    let before_tests = match all.find("\n#[cfg(test)]\nmod ") {
        Some(at) => &all[..at],
        None => &all,
    };
    let (text, strings) = lex(before_tests);
    Code {
        file: path.display().to_string(),
        text,
        strings,
    }
}

/// Splits Rust source into code (comments dropped, literals blanked) and string literals.
fn lex(src: &str) -> (String, Vec<String>) {
    let c: Vec<char> = src.chars().collect();
    let (mut code, mut strings) = (String::new(), Vec::new());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        let ident = |k: usize| c[k].is_alphanumeric() || c[k] == '_';
        // `r"…"`, `r#"…"#` and `br#"…"#` are raw; `for"` is not a thing, `bar#` neither.
        let ident_before = i > 0 && ident(i - 1) && !(c[i - 1] == 'b' && (i < 2 || !ident(i - 2)));
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c[i] == 'r' && !ident_before && matches!(next, Some('"' | '#')) {
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                code.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body_start = j + 1;
            let rest: String = c[body_start..].iter().collect();
            let len = rest.find(&close).expect("a raw string closes");
            strings.push(rest[..len].to_string());
            code.push_str("\"\"");
            i = body_start + rest[..len].chars().count() + close.chars().count();
        } else if c[i] == '"' {
            let mut s = String::new();
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    s.push(c[i]);
                    i += 1;
                }
                s.push(c[i]);
                i += 1;
            }
            i += 1;
            strings.push(s);
            code.push_str("\"\"");
        } else if c[i] == '\'' && next == Some('\\') {
            // An escaped char literal: '\n', '\'', '\u{…}'.
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            code.push_str("' '");
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            code.push_str("' '");
        } else {
            code.push(c[i]);
            i += 1;
        }
    }
    (code, strings)
}

/// The Rust files of `src/slack/`, this module's own excepted (its tables name everything).
fn slack_sources() -> Vec<Code> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/slack");
    // Every file, folders included (a type's methods may sit in a child file, as
    // `api/readback.rs`), the manifest's own files left out.
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(&dir, &mut files);
    files.retain(|p| {
        !p.strip_prefix(&dir).unwrap().components().any(|c| {
            Path::new(c.as_os_str())
                .file_stem()
                .is_some_and(|s| s == "manifest")
        })
    });
    files.sort();
    assert!(files.len() > 5, "src/slack/ was not found: {files:?}");
    files.iter().map(|p| read_code(p)).collect()
}

/// The families of Slack's Web API methods (the part before the first dot).
const FAMILIES: &[&str] = &[
    "admin",
    "agents",
    "api",
    "apps",
    "assistant",
    "auth",
    "bookmarks",
    "bots",
    "calls",
    "canvases",
    "chat",
    "conversations",
    "dialog",
    "dnd",
    "emoji",
    "entity",
    "files",
    "functions",
    "lists",
    "migration",
    "oauth",
    "openid",
    "pins",
    "reactions",
    "reminders",
    "rtm",
    "search",
    "stars",
    "team",
    "tooling",
    "usergroups",
    "users",
    "views",
    "workflows",
];

/// A string that names a Web API method: a family, a dot, then dotted camelCase words (not a
/// host: `files.slack.com` is where files are fetched from, not a method).
fn is_method_name(s: &str) -> bool {
    if s.ends_with(".slack.com") {
        return false;
    }
    let mut parts = s.split('.');
    let family = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    FAMILIES.contains(&family)
        && !rest.is_empty()
        && rest.iter().all(|p| {
            p.starts_with(|c: char| c.is_ascii_lowercase())
                && p.chars().all(|c| c.is_ascii_alphabetic())
        })
}

/// The identifiers that follow `prefix` in `text` (`prefix` not inside a longer name), each
/// with the text after it.
fn names_after<'a>(text: &'a str, prefix: &str) -> Vec<(&'a str, &'a str)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out.push((&rest[..end], &rest[end..]));
    }
    out
}

/// The Web API methods the code calls, each with the first file that names it.
fn methods_called(sources: &[Code]) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut unknown = Vec::new();
    for code in sources {
        let literal = code
            .strings
            .iter()
            .filter(|s| is_method_name(s) && !APP_TOKEN_CALLS.iter().any(|(_, m)| m == s))
            .cloned();
        let mut names: Vec<String> = literal.collect();
        for (call, after) in names_after(&code.text, "session.") {
            if !after.starts_with('(') {
                continue; // a field, like `session.http_session_api`
            }
            if APP_TOKEN_CALLS.iter().any(|(f, _)| *f == call) {
                continue;
            }
            match MORPHISM_CALLS.iter().find(|(f, _)| *f == call) {
                Some((_, method)) => names.push(method.to_string()),
                None => unknown.push(format!("{}: session.{call}(…)", code.file)),
            }
        }
        for name in names {
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, code.file.clone()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "slack-morphism calls the manifest test cannot name; add each to MORPHISM_CALLS with its Web API method: {unknown:#?}"
    );
    found
}

#[test]
fn every_web_api_method_the_code_calls_has_its_scopes_in_the_manifest() {
    let called = methods_called(&slack_sources());
    let missing: Vec<String> = called
        .iter()
        .filter(|(name, _)| !METHODS.iter().any(|m| m.name == name))
        .map(|(name, file)| format!("{name} (called in {file})"))
        .collect();
    assert!(
        missing.is_empty(),
        "Web API methods the code calls without an entry in manifest::METHODS (add each with the bot scopes Slack documents for it): {missing:#?}"
    );
    let unused: Vec<&str> = METHODS
        .iter()
        .map(|m| m.name)
        .filter(|name| !called.iter().any(|(n, _)| n == name))
        .collect();
    assert!(
        unused.is_empty(),
        "manifest::METHODS entries no code in src/slack/ calls any more (remove them, and their scopes if nothing else needs them): {unused:?}"
    );
    assert!(called.len() >= 10, "the scan found too little: {called:?}");
}

#[test]
fn every_event_the_intake_handles_is_subscribed_to() {
    let sources = slack_sources();
    let mut handled = BTreeSet::new();
    for code in &sources {
        for (variant, _) in names_after(&code.text, "SlackEventCallbackBody::") {
            handled.insert(snake_case(variant));
        }
    }
    let listed: BTreeSet<String> = EVENTS.iter().map(|e| e.handled.to_string()).collect();
    let missing: Vec<&String> = handled.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "event types the intake handles without an entry in manifest::EVENTS (add each with its bot events and their scopes): {missing:?}"
    );
    let unused: Vec<&String> = listed.difference(&handled).collect();
    assert!(
        unused.is_empty(),
        "manifest::EVENTS entries the intake no longer handles (remove them): {unused:?}"
    );
}

/// The events marked `inner_life_only` are those whose intake arm only ever feels (or
/// ignores): nothing is answered, so `--minimal` loses no reply.
#[test]
fn the_events_only_the_inner_life_uses_are_those_the_intake_only_feels() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/slack/intake.rs");
    let code = read_code(&path).text;
    let arms: Vec<(&str, &str)> = names_after(&code, "SlackEventCallbackBody::");
    let mut only_felt = BTreeSet::new();
    for (variant, after) in &arms {
        // The arm: up to the next event variant or the end of its function.
        let end = [after.find("SlackEventCallbackBody::"), after.find("\n}\n")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(after.len());
        let arm = &after[..end];
        let decisions: Vec<&str> = names_after(arm, "Decision::")
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        if decisions.contains(&"Felt") && decisions.iter().all(|d| matches!(*d, "Felt" | "Ignore"))
        {
            only_felt.insert(snake_case(variant));
        }
    }
    let marked: BTreeSet<String> = EVENTS
        .iter()
        .filter(|e| e.inner_life_only)
        .map(|e| e.handled.to_string())
        .collect();
    assert_eq!(
        marked, only_felt,
        "manifest::EVENTS' inner_life_only marks must be the intake's events that are only felt"
    );
    assert_eq!(
        marked,
        BTreeSet::from(["member_joined_channel".into(), "reaction_added".into()])
    );
}

/// `--minimal` leaves out the inner life's events and the scopes only they need, and keeps
/// every scope a Web API method needs.
#[test]
fn the_minimal_manifest_leaves_out_only_what_the_inner_life_uses() {
    let full: BTreeSet<&str> = bot_scopes(Extent::Full).into_iter().collect();
    let minimal: BTreeSet<&str> = bot_scopes(Extent::Minimal).into_iter().collect();
    let left_out: Vec<&str> = full.difference(&minimal).copied().collect();
    assert_eq!(left_out, ["channels:read", "groups:read", "reactions:read"]);
    // The files shared with a message are read whatever the extent: they are what is said.
    assert!(minimal.contains(FILES_SCOPE));
    for m in METHODS {
        for scope in m.scopes {
            assert!(minimal.contains(scope), "{} needs {scope}", m.name);
        }
    }
    let events = bot_events(Extent::Minimal);
    assert!(!events.contains(&"reaction_added") && !events.contains(&"member_joined_channel"));
    assert_eq!(events.len() + 2, bot_events(Extent::Full).len());
    let m = manifest(&app(&[]), Delivery::Socket, Extent::Minimal);
    assert_eq!(
        m["oauth_config"]["scopes"]["bot"],
        json!(Vec::from_iter(minimal))
    );
    assert_eq!(
        m["settings"]["event_subscriptions"]["bot_events"],
        json!(events)
    );
}

/// docs/slack.md names every Web API method anima calls with the scopes it needs, and each
/// optional scope as optional.
#[test]
fn the_slack_page_names_every_method_with_its_scopes() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/slack.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let mut missing = Vec::new();
    for m in METHODS {
        let scopes = if m.scopes.is_empty() {
            "none".to_string()
        } else {
            m.scopes
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let row = format!("| `{}` | {scopes} |", m.name);
        if !page.contains(&row) {
            missing.push(row);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/slack.md lacks these rows of its methods table: {missing:#?}"
    );
    for e in EVENTS.iter().filter(|e| e.inner_life_only) {
        for (event, scopes) in e.subscriptions {
            for scope in *scopes {
                let row = format!("| `{scope}` | optional: `{event}`");
                assert!(page.contains(&row), "docs/slack.md lacks {row:?}");
            }
        }
    }
}

#[test]
fn interactivity_is_on_because_the_code_takes_interactions() {
    let takes = slack_sources()
        .iter()
        .any(|c| c.text.contains("SlackInteractionEvent"));
    assert!(
        takes,
        "the code no longer takes interactions: turn interactivity off"
    );
    let m = manifest(&app(&[]), Delivery::Socket, Extent::Full);
    assert_eq!(m["settings"]["interactivity"]["is_enabled"], json!(true));
}

/// Every message shortcut in the manifest is one the code answers (a `message_action` with
/// its callback id), and the code answers no other.
#[test]
fn every_message_shortcut_the_code_answers_is_in_the_manifest() {
    let sources = slack_sources();
    let why = sources
        .iter()
        .find(|c| c.file.ends_with("why.rs"))
        .expect("src/slack/why.rs");
    assert!(
        why.text.contains("SlackInteractionEvent::MessageAction"),
        "why.rs no longer reads message shortcuts"
    );
    let answered: BTreeSet<&str> = sources
        .iter()
        .filter(|c| c.text.contains("SlackInteractionEvent::MessageAction"))
        .map(|_| super::super::why::CALLBACK_ID)
        .collect();
    let listed: BTreeSet<&str> = SHORTCUTS.iter().map(|s| s.callback_id).collect();
    assert_eq!(listed, answered);
    let m = manifest(&app(&[]), Delivery::Socket, Extent::Minimal);
    assert_eq!(
        m["features"]["shortcuts"],
        json!([{"name": "Why did you say that?", "type": "message", "callback_id": "anima_why",
                "description": SHORTCUTS[0].description}])
    );
    assert!(SHORTCUTS
        .iter()
        .all(|s| s.name.chars().count() <= 24 && s.description.chars().count() <= 150));
    let scopes = bot_scopes(Extent::Minimal);
    assert!(
        scopes.contains(&"commands"),
        "shortcuts need it: {scopes:?}"
    );
    assert_eq!(m["settings"]["interactivity"]["is_enabled"], json!(true));
}

/// Every Slack call goes through a session named `session`, so the scan above sees them all.
#[test]
fn every_slack_session_is_named_session() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut odd = Vec::new();
    for file in files {
        let code = read_code(&file);
        for line in code.text.lines().filter(|l| l.contains("open_session(")) {
            if !line.trim_start().starts_with("let session = ") {
                odd.push(format!("{}: {}", code.file, line.trim()));
            }
        }
    }
    assert!(
        odd.is_empty(),
        "Slack sessions the manifest test cannot follow (write `let session = …open_session(…)`): {odd:#?}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// slack-morphism's variant name as Slack's event type (its serde `rename_all`).
fn snake_case(variant: &str) -> String {
    let mut out = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_scanner_reads_literals_calls_and_variants() {
    let (code, strings) = lex(concat!(
        "// \"in.aComment\"\n",
        "let a = '\"'; let b = '\\''; let c: &'static str = r#\"raw.one\"#;\n",
        "/* \"block.comment\" */ self.timed(\"chat.postMessage\", session.chat_update(&r))\n",
        "session.http_session_api.http_post(\"assistant.threads.setStatus\")\n",
        "match b { SlackEventCallbackBody::ReactionAdded(e) => {} }\n",
    ));
    assert_eq!(
        strings,
        ["raw.one", "chat.postMessage", "assistant.threads.setStatus"]
    );
    let calls: Vec<(&str, bool)> = names_after(&code, "session.")
        .into_iter()
        .map(|(name, after)| (name, after.starts_with('(')))
        .collect();
    assert_eq!(calls, [("chat_update", true), ("http_session_api", false)]);
    let variants: Vec<&str> = names_after(&code, "SlackEventCallbackBody::")
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(variants, ["ReactionAdded"]);
    assert_eq!(snake_case("AgentSessionStopped"), "agent_session_stopped");
    assert!(is_method_name("assistant.threads.setSuggestedPrompts"));
    for not in [
        "0.0",
        "t.toml",
        "soul.md",
        "chat",
        "chat.",
        "chat.B",
        "chat.post_message",
        "/slack/events",
    ] {
        assert!(!is_method_name(not), "{not}");
    }
}

fn app(prompts: &[Prompt]) -> App<'_> {
    App {
        name: "Wren",
        prompts,
    }
}

fn prompt(n: usize) -> Prompt {
    Prompt {
        title: format!("Prompt {n}"),
        message: format!("Do thing {n}"),
    }
}

#[test]
fn socket_mode_has_no_urls_and_every_scope_and_event() {
    let prompts: Vec<Prompt> = (1..=6).map(prompt).collect();
    let m = manifest(&app(&prompts), Delivery::Socket, Extent::Full);
    assert_eq!(m["display_information"]["name"], "Wren");
    assert_eq!(m["features"]["bot_user"]["display_name"], "Wren");
    assert_eq!(m["features"]["bot_user"]["always_online"], true);
    let home = &m["features"]["app_home"];
    assert_eq!(home["messages_tab_enabled"], true);
    assert_eq!(home["messages_tab_read_only_enabled"], false);
    let view = &m["features"]["agent_view"];
    assert!(view["agent_description"]
        .as_str()
        .unwrap()
        .starts_with("Wren"));
    let offered = view["suggested_prompts"].as_array().unwrap();
    assert_eq!(offered.len(), MAX_PROMPTS, "Slack shows at most four");
    assert_eq!(
        offered[0],
        json!({"title": "Prompt 1", "message": "Do thing 1"})
    );
    let s = &m["settings"];
    assert_eq!(s["socket_mode_enabled"], true);
    assert_eq!(s["org_deploy_enabled"], false);
    assert_eq!(s["token_rotation_enabled"], false);
    assert_eq!(s["event_subscriptions"].get("request_url"), None);
    assert_eq!(s["interactivity"], json!({"is_enabled": true}));
    assert_eq!(
        s["event_subscriptions"]["bot_events"],
        json!([
            "message.channels",
            "message.groups",
            "message.im",
            "message.mpim",
            "app_mention",
            "reaction_added",
            "member_joined_channel",
            "assistant_thread_started",
            "app_home_opened",
            "agent_session_stopped"
        ])
    );
    assert_eq!(
        m["oauth_config"]["scopes"]["bot"],
        json!([
            "app_mentions:read",
            "assistant:write",
            "channels:history",
            "channels:read",
            "chat:write",
            "commands",
            "files:read",
            "groups:history",
            "groups:read",
            "im:history",
            "mpim:history",
            "reactions:read",
            "reactions:write",
            "users:read"
        ])
    );
}

#[test]
fn the_events_api_takes_events_and_interactions_at_one_url() {
    let url = "https://x.example/slack/events";
    let m = manifest(&app(&[]), Delivery::Events { url }, Extent::Full);
    let s = &m["settings"];
    assert_eq!(s["socket_mode_enabled"], false);
    assert_eq!(s["event_subscriptions"]["request_url"], url);
    assert_eq!(
        s["interactivity"],
        json!({"is_enabled": true, "request_url": url})
    );
    assert_eq!(
        m["features"]["agent_view"].get("suggested_prompts"),
        None,
        "no prompts, no key"
    );
}

#[test]
fn a_long_name_is_cut_to_what_slack_takes() {
    let name = "Ünïcode ".repeat(20);
    let m = manifest(
        &App {
            name: &name,
            prompts: &[],
        },
        Delivery::Socket,
        Extent::Full,
    );
    let len = |v: &Value| v.as_str().unwrap().chars().count();
    assert!(len(&m["display_information"]["name"]) <= 35);
    assert!(len(&m["features"]["bot_user"]["display_name"]) <= 80);
    assert!(len(&m["display_information"]["description"]) <= 140);
    assert!(len(&m["features"]["agent_view"]["agent_description"]) <= 140);
}

#[test]
fn yaml_has_the_manifest_shape() {
    let prompts = [Prompt {
        title: "Untangle a bug".into(),
        message: "I have a bug: \"help\"".into(),
    }];
    let m = manifest(&app(&prompts), Delivery::Socket, Extent::Full);
    let y = to_yaml(&m);
    assert!(y.contains("\nfeatures:\n  agent_view:\n"), "{y}");
    assert!(
        y.contains(
            "    suggested_prompts:\n      - message: \"I have a bug: \\\"help\\\"\"\n        title: \"Untangle a bug\"\n"
        ) || y.contains(
            "    suggested_prompts:\n      - title: \"Untangle a bug\"\n        message: \"I have a bug: \\\"help\\\"\"\n"
        ),
        "{y}"
    );
    assert!(
        y.contains("\n    bot:\n      - \"app_mentions:read\"\n"),
        "{y}"
    );
    assert!(y.contains("\n  socket_mode_enabled: true\n"), "{y}");
}

#[test]
fn yaml_writes_blocks_and_empty_collections() {
    // Keys in sorted order: serde_json's map may keep either order.
    let v = json!({
        "a": {"b": [1, true, null], "c": [], "d": {}},
        "has space": "v",
        "list": [{"w": "1", "x": {"on": "2"}}, ["in", "ner"]],
    });
    let expected = concat!(
        "a:\n",
        "  b:\n",
        "    - 1\n",
        "    - true\n",
        "    - null\n",
        "  c: []\n",
        "  d: {}\n",
        "\"has space\": \"v\"\n",
        "list:\n",
        "  - w: \"1\"\n",
        "    x:\n",
        "      \"on\": \"2\"\n",
        "  -\n",
        "    - \"in\"\n",
        "    - \"ner\"\n",
    );
    assert_eq!(to_yaml(&v), expected);
    let back: Value = serde_yaml_ng::from_str(expected).unwrap();
    assert_eq!(back, v);
}

#[test]
fn every_string_is_quoted_so_yaml_reads_it_back_as_written() {
    for (s, q) in [
        ("yes", r#""yes""#),
        ("1.0", r#""1.0""#),
        ("# not a comment", r##""# not a comment""##),
        ("key: value", r#""key: value""#),
        ("- item", r#""- item""#),
        ("say \"hi\" \\o/", r#""say \"hi\" \\o/""#),
        ("two\nlines\ttab\r", r#""two\nlines\ttab\r""#),
        ("bell\u{7}del\u{7f}", r#""bell\u0007del\u007F""#),
        (
            "nel\u{85}ls\u{2028}ps\u{2029}",
            r#""nel\u0085ls\u2028ps\u2029""#,
        ),
        ("bom\u{feff}", r#""bom\uFEFF""#),
        ("Wren … 🦀 é", "\"Wren … 🦀 é\""),
        ("", r#""""#),
    ] {
        assert_eq!(quoted(s), q, "{s:?}");
    }
}

/// The YAML, read back by a YAML parser, is the JSON manifest, whatever words the soul has.
#[test]
fn yaml_reads_back_as_the_json_manifest() {
    let prompts = [
        Prompt {
            title: "yes".into(),
            message: "null".into(),
        },
        Prompt {
            title: "# hash: colon - dash".into(),
            message: "line\nbreak \"quotes\" \\ 'single' \u{85}\u{2028}\u{7f} 🦀 {x} [y] &a *b !c %d @e `f`".into(),
        },
    ];
    for (name, extent) in [
        ("Wren", Extent::Full),
        ("on", Extent::Minimal),
        ("0x1F", Extent::Full),
        ("- dash: colon # hash", Extent::Minimal),
        ("Ünï 🦀", Extent::Full),
    ] {
        for delivery in [
            Delivery::Socket,
            Delivery::Events {
                url: "https://x.example/slack/events?a=b#c",
            },
        ] {
            let m = manifest(
                &App {
                    name,
                    prompts: &prompts,
                },
                delivery,
                extent,
            );
            let back: Value = serde_yaml_ng::from_str(&to_yaml(&m)).unwrap();
            assert_eq!(back, m, "{name}");
        }
    }
}
