//! What anima answers: Slack events → accepted inbox rows, by pure rules.
//!
//! Answers channel mentions (in the mention's thread), direct messages (a top-level DM at top
//! level, the DM's top level being one conversation; a DM thread in its thread), and later
//! messages in threads the soul has spoken in. Ignores its own posts, other bots unless
//! `reply_to_bots`, hidden and non-content subtypes, channels or users outside the
//! allow-lists, and events it could not answer (no channel, a `ts` or `thread_ts` that is not
//! a Slack timestamp). A message's files (`files[]`) travel with it as `files::Attachment`s,
//! read in its turn; a message that is only files is answered too. Also reads the AI-app surfaces' events: an assistant thread begun, the
//! Messages tab opened (agent_view), and the stop button (`agent_session_stopped`). No I/O:
//! `decide` returns what to do.

use slack_morphism::prelude::*;

use super::api::BotIdentity;
use super::NewInbound;
use crate::admin;
use crate::config::SlackConfig;
use crate::files::Attachment;

/// The most files of one message kept with it (Slack sends at most 10; `[files] max_files`
/// bounds what is read).
const MAX_KEPT_FILES: usize = 20;

/// What to do with one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Accept(NewInbound),
    /// An assistant thread began: remember it, answer nothing yet.
    AssistantThread {
        channel: String,
        thread_ts: String,
    },
    /// A direct message that is an admin command (`!status` …): not a conversation turn.
    Admin(NewInbound),
    /// Something that happened to the soul that is not a message to answer: it moves its
    /// inner life (a reaction to one of its messages, a person joining a channel it is in).
    Felt(Felt),
    /// A top-level message in a channel the soul listens to (`[autonomy] channels`) that does
    /// not address it: the meaningfulness gate decides whether the soul speaks (in its thread).
    Overheard(NewInbound),
    /// A person opened the soul's Messages tab (agent_view): a DM to greet, once.
    MessagesOpened {
        channel: String,
    },
    /// The person pressed stop: stop the turn running in the first of these conversations
    /// that has one (most likely first).
    Stop {
        conversations: Vec<String>,
        /// The messages Slack says were streaming when the person pressed stop.
        streams: Vec<String>,
    },
    Ignore(&'static str),
}

/// A reaction or a joining, in the router's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Felt {
    pub happening: crate::router::Happening,
    pub channel: String,
    pub user: String,
    /// Its words, for the soul's lexicon (a reaction's name and what it usually means).
    pub text: String,
    /// Its name: Slack's retries of it are felt once.
    pub source: String,
}

/// What a reaction usually says, in words the soul's lexicon reads.
fn reaction_words(name: &str) -> String {
    let base = name.split("::").next().unwrap_or(name);
    let meaning = match base {
        "+1" | "thumbsup" | "heart" | "tada" | "raised_hands" | "pray" | "clap" | "100"
        | "star-struck" | "heart_eyes" | "hugging_face" | "sparkles" => "thanks, love it, great",
        "-1"
        | "thumbsdown"
        | "angry"
        | "rage"
        | "face_with_symbols_on_mouth"
        | "disappointed"
        | "unamused" => "bad, I hate this, useless",
        _ => "",
    };
    format!(":{name}: {meaning}").trim_end().to_string()
}

/// The parts of a message event the rules read.
struct Msg<'a> {
    channel: &'a str,
    channel_type: Option<&'a str>,
    ts: &'a str,
    thread_ts: Option<&'a str>,
    user: Option<&'a str>,
    bot_id: Option<&'a str>,
    text: &'a str,
    mention_event: bool,
    files: &'a [SlackFile],
}

/// What to do with one event: each kind of event is read by its own rule.
pub fn decide(
    body: &SlackEventCallbackBody,
    event_id: &str,
    bot: &BotIdentity,
    cfg: &SlackConfig,
) -> Decision {
    match body {
        SlackEventCallbackBody::Message(m) => message(m, event_id, bot, cfg),
        SlackEventCallbackBody::AppMention(m) => decide_msg(
            Msg {
                channel: m.channel.0.as_str(),
                channel_type: Some("channel"),
                ts: m.origin.ts.0.as_str(),
                thread_ts: m.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
                user: Some(m.user.0.as_str()),
                bot_id: None,
                text: m.content.text.as_deref().unwrap_or(""),
                mention_event: true,
                files: m.content.files.as_deref().unwrap_or_default(),
            },
            event_id,
            bot,
            cfg,
        ),
        SlackEventCallbackBody::ReactionAdded(e) => {
            reaction(e, bot).map_or_else(Decision::Ignore, Decision::Felt)
        }
        SlackEventCallbackBody::MemberJoinedChannel(e) => {
            joined(e, event_id, bot).map_or_else(Decision::Ignore, Decision::Felt)
        }
        SlackEventCallbackBody::AssistantThreadStarted(e) => Decision::AssistantThread {
            channel: e.assistant_thread.channel_id.to_string(),
            thread_ts: e.assistant_thread.thread_ts.to_string(),
        },
        SlackEventCallbackBody::AppHomeOpened(e) => home_opened(e, cfg),
        SlackEventCallbackBody::AgentSessionStopped(e) => stopped(e),
        _ => Decision::Ignore("an event type anima does not answer"),
    }
}

/// A message event: hidden ones and subtypes that are not user content are ignored; the
/// rest go through the message rules.
fn message(
    m: &SlackMessageEvent,
    event_id: &str,
    bot: &BotIdentity,
    cfg: &SlackConfig,
) -> Decision {
    if m.hidden == Some(true) {
        return Decision::Ignore("hidden message (edit, deletion or thread root change)");
    }
    match &m.subtype {
        None
        | Some(SlackMessageEventType::FileShare)
        | Some(SlackMessageEventType::ThreadBroadcast) => {}
        Some(SlackMessageEventType::BotMessage) if cfg.reply_to_bots => {}
        Some(SlackMessageEventType::BotMessage) => {
            return Decision::Ignore("another bot's message")
        }
        Some(_) => return Decision::Ignore("a message subtype that is not user content"),
    }
    let Some(channel) = m.origin.channel.as_ref() else {
        return Decision::Ignore("message without a channel");
    };
    let channel_type = m.origin.channel_type.as_ref().map(|t| t.0.as_str());
    let text = m
        .content
        .as_ref()
        .and_then(|c| c.text.as_deref())
        .unwrap_or("");
    let files = m
        .content
        .as_ref()
        .and_then(|c| c.files.as_deref())
        .unwrap_or_default();
    decide_msg(
        Msg {
            channel: channel.0.as_str(),
            channel_type,
            ts: m.origin.ts.0.as_str(),
            thread_ts: m.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
            user: m.sender.user.as_ref().map(|u| u.0.as_str()),
            bot_id: m.sender.bot_id.as_ref().map(|b| b.0.as_str()),
            text,
            mention_event: false,
            files,
        },
        event_id,
        bot,
        cfg,
    )
}

/// A reaction: felt when someone else reacts to one of the soul's messages; otherwise why
/// it is ignored.
fn reaction(e: &SlackReactionAddedEvent, bot: &BotIdentity) -> Result<Felt, &'static str> {
    let to_soul = e.item_user.as_ref().map(|u| u.0.as_str()) == Some(bot.user_id.as_str());
    let SlackReactionsItem::Message(m) = &e.item else {
        return Err("a reaction to a file");
    };
    let Some(channel) = m.origin.channel.as_ref().map(|c| c.0.clone()) else {
        return Err("a reaction without a channel");
    };
    if !to_soul || e.user.0 == bot.user_id {
        return Err("a reaction to someone else's message");
    }
    Ok(Felt {
        happening: crate::router::Happening::Reaction,
        source: format!(
            "reaction:{channel}:{}:{}:{}",
            m.origin.ts, e.user, e.reaction
        ),
        channel,
        user: e.user.to_string(),
        text: reaction_words(&e.reaction.0),
    })
}

/// Someone else joining a channel the soul is in: felt; the soul itself joining is ignored.
fn joined(
    e: &SlackMemberJoinedChannelEvent,
    event_id: &str,
    bot: &BotIdentity,
) -> Result<Felt, &'static str> {
    if e.user.0 == bot.user_id {
        return Err("the soul joined a channel");
    }
    Ok(Felt {
        happening: crate::router::Happening::Joined,
        source: format!("joined:{}:{}:{}", e.channel, e.user, event_id),
        channel: e.channel.to_string(),
        user: e.user.to_string(),
        text: "joined the channel".into(),
    })
}

/// The Messages tab opened, in a direct channel the allow-lists admit: a DM to greet.
fn home_opened(e: &SlackAppHomeOpenedEvent, cfg: &SlackConfig) -> Decision {
    if e.tab.as_deref() != Some("messages") {
        return Decision::Ignore("the app's home opened on a tab other than messages");
    }
    let (channel, user) = (e.channel.0.as_str(), e.user.0.as_str());
    if !channel.starts_with('D') {
        return Decision::Ignore("the messages tab opened without a direct channel");
    }
    if !cfg.allowed_channels.is_empty() && !cfg.allowed_channels.iter().any(|c| c == channel) {
        return Decision::Ignore("channel not in allowed_channels");
    }
    if !cfg.allowed_users.is_empty() && !cfg.allowed_users.iter().any(|u| u == user) {
        return Decision::Ignore("user not in allowed_users");
    }
    Decision::MessagesOpened {
        channel: channel.to_string(),
    }
}

/// The stop button: the conversations it may mean and the streams Slack names.
fn stopped(e: &SlackAgentSessionStoppedEvent) -> Decision {
    let channel = e.channel.0.as_str();
    let Some(thread_ts) = e.thread_ts.as_ref().map(|t| t.0.as_str()) else {
        return Decision::Ignore("a stop without a thread");
    };
    if channel.is_empty() || !is_slack_ts(thread_ts) {
        return Decision::Ignore("a stop whose channel or thread_ts is unusable");
    }
    Decision::Stop {
        conversations: stopped_conversations(channel, thread_ts),
        streams: e
            .streaming_message_ts
            .iter()
            .flatten()
            .map(|t| t.to_string())
            .collect(),
    }
}

/// The conversations a stop in `thread_ts` of `channel` may mean, computed as for a message
/// there: a message inside that thread is the conversation `channel:thread_ts`. In a DM the
/// thread may also be a top-level message whose reply went into its own thread (the DM's
/// top level is one conversation): that is tried second.
fn stopped_conversations(channel: &str, thread_ts: &str) -> Vec<String> {
    let mut keys = vec![format!("{channel}:{thread_ts}")];
    if channel.starts_with('D') {
        keys.push(channel.to_string());
    }
    keys
}

fn decide_msg(m: Msg, event_id: &str, bot: &BotIdentity, cfg: &SlackConfig) -> Decision {
    if m.channel.is_empty() {
        return Decision::Ignore("message with an empty channel");
    }
    if !is_slack_ts(m.ts) {
        return Decision::Ignore("message whose ts is not a Slack timestamp");
    }
    if m.thread_ts.is_some_and(|t| !is_slack_ts(t)) {
        return Decision::Ignore("message whose thread_ts is not a Slack timestamp");
    }
    let own = m.user == Some(bot.user_id.as_str())
        || (m.bot_id.is_some() && m.bot_id == bot.bot_id.as_deref());
    if own {
        return Decision::Ignore("the soul's own message");
    }
    if m.bot_id.is_some() && !cfg.reply_to_bots {
        return Decision::Ignore("another bot's message");
    }
    let Some(user) = m.user.or(m.bot_id) else {
        return Decision::Ignore("message without a sender");
    };
    if !cfg.allowed_channels.is_empty() && !cfg.allowed_channels.iter().any(|c| c == m.channel) {
        return Decision::Ignore("channel not in allowed_channels");
    }
    if !cfg.allowed_users.is_empty() && !cfg.allowed_users.iter().any(|u| u == user) {
        return Decision::Ignore("user not in allowed_users");
    }
    if m.text.trim().is_empty() && m.files.is_empty() {
        return Decision::Ignore("message without text");
    }
    let files = attachments(m.files);
    let kind = match m.channel_type {
        Some("im") => Kind::Direct,
        Some("channel" | "group" | "mpim") => Kind::Channel,
        Some(_) => return Decision::Ignore("unknown channel type"),
        None if m.channel.starts_with('D') => Kind::Direct,
        None => return Decision::Ignore("unknown channel type"),
    };
    let in_thread = m.thread_ts.filter(|t| *t != m.ts);
    let mentioned = m.mention_event || mentions(m.text, &bot.user_id);
    let (thread_key, reply_thread_ts, only_if) = match (kind, in_thread) {
        (Kind::Direct, None) => (m.channel.to_string(), None, None),
        (Kind::Direct, Some(t)) => (format!("{}:{t}", m.channel), Some(t.to_string()), None),
        (Kind::Channel, None) if mentioned => (
            format!("{}:{}", m.channel, m.ts),
            Some(m.ts.to_string()),
            None,
        ),
        (Kind::Channel, None) if cfg.overheard_channels.iter().any(|c| c == m.channel) => {
            return Decision::Overheard(NewInbound {
                event_id: Some(event_id.to_string()),
                channel: m.channel.to_string(),
                ts: m.ts.to_string(),
                thread_key: format!("{}:{}", m.channel, m.ts),
                reply_thread_ts: Some(m.ts.to_string()),
                user_id: user.to_string(),
                text: m.text.to_string(),
                only_if_participating: None,
                files,
            })
        }
        (Kind::Channel, None) => return Decision::Ignore("unmentioned top-level channel message"),
        (Kind::Channel, Some(t)) => {
            let only_if = (!mentioned).then(|| (m.channel.to_string(), t.to_string()));
            (format!("{}:{t}", m.channel), Some(t.to_string()), only_if)
        }
    };
    let inbound = NewInbound {
        event_id: Some(event_id.to_string()),
        channel: m.channel.to_string(),
        ts: m.ts.to_string(),
        thread_key,
        reply_thread_ts,
        user_id: user.to_string(),
        text: without_leading_mention(m.text, &bot.user_id),
        only_if_participating: only_if,
        files,
    };
    if matches!(kind, Kind::Direct) && admin::parse(&inbound.text) != admin::Parsed::NotACommand {
        return Decision::Admin(inbound);
    }
    Decision::Accept(inbound)
}

/// Slack's files as the attachments that travel with the message: the download URL (or the
/// private one), everything else as Slack declared it (untrusted; the size Slack sends is not
/// in slack-morphism's model, so it is learnt while reading).
fn attachments(files: &[SlackFile]) -> Vec<Attachment> {
    files
        .iter()
        .take(MAX_KEPT_FILES)
        .map(|f| Attachment {
            id: f.id.to_string(),
            name: f
                .name
                .clone()
                .or_else(|| f.title.clone())
                .unwrap_or_default(),
            mimetype: f
                .mimetype
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
            filetype: f
                .filetype
                .as_ref()
                .map(|t| t.to_string())
                .unwrap_or_default(),
            size: 0,
            url: f
                .url_private_download
                .as_ref()
                .or(f.url_private.as_ref())
                .map(|u| u.to_string())
                .unwrap_or_default(),
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Kind {
    Direct,
    Channel,
}

/// A Slack timestamp: digits, a dot, digits (`1515449522.000016`).
fn is_slack_ts(ts: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    ts.split_once('.')
        .is_some_and(|(secs, frac)| digits(secs) && digits(frac))
}

/// The text without the mention of the bot that opens it (`<@UBOT> hi` → `hi`).
fn without_leading_mention(text: &str, bot_user: &str) -> String {
    let t = text.trim_start();
    let rest = t.strip_prefix(&format!("<@{bot_user}>")).or_else(|| {
        t.strip_prefix(&format!("<@{bot_user}|"))
            .and_then(|r| r.split_once('>').map(|x| x.1))
    });
    // A mention followed only by punctuation keeps its text: there is nothing else to read.
    rest.map(|r| r.trim_start().trim_start_matches([',', ':']).trim())
        .filter(|r| !r.is_empty())
        .unwrap_or(text)
        .to_string()
}

/// `<@U123>` or `<@U123|name>` for the bot.
fn mentions(text: &str, bot_user: &str) -> bool {
    text.contains(&format!("<@{bot_user}>")) || text.contains(&format!("<@{bot_user}|"))
}

#[cfg(test)]
mod tests;
