//! The judge: a yes/no question about a reply (and the conversation so far) put to a model,
//! its verdict and its reason. A verdict that is neither yes nor no fails the expectation and
//! says so.

use crate::llm::{ChatRequest, Provider};

/// What the judge is told it is.
const SYSTEM: &str = "You judge one reply of a chatbot in a test. You are shown the conversation and the reply, then asked a yes/no question about it. Answer on the first line with exactly one word, yes or no; on the second line give your reason in one sentence.";

/// The judge's verdict on a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Yes(String),
    No(String),
    /// Neither yes nor no: the whole answer.
    Neither(String),
}

/// The text the judge reads: the conversation (speaker: words), the reply, the question.
pub fn question(conversation: &[(String, String)], reply: &str, question: &str) -> String {
    let mut out = String::from("<conversation>\n");
    for (who, said) in conversation {
        out += &format!("{who}: {said}\n");
    }
    out += "</conversation>\n<reply>\n";
    out += reply;
    out += "\n</reply>\n<question>\n";
    out += question;
    out += "\n</question>\nAnswer yes or no on the first line, then your reason.";
    out
}

/// Reads the judge's answer: its first word yes or no (any case, any punctuation around it),
/// the rest its reason.
pub fn verdict(answer: &str) -> Verdict {
    let text = answer.trim();
    let first: String = text
        .chars()
        .skip_while(|c| !c.is_alphanumeric())
        .take_while(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    let reason = text
        .split_once(['\n', '.', ',', ':', ' '])
        .map_or("", |(_, rest)| rest)
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .trim()
        .to_string();
    match first.as_str() {
        "yes" => Verdict::Yes(reason),
        "no" => Verdict::No(reason),
        _ => Verdict::Neither(text.to_string()),
    }
}

/// Asks `provider` the question: the verdict, or why the judge could not be asked.
pub async fn ask(
    provider: &dyn Provider,
    conversation: &[(String, String)],
    reply: &str,
    q: &str,
) -> Result<Verdict, String> {
    let user = question(conversation, reply, q);
    let req = ChatRequest {
        system: SYSTEM,
        history: &[],
        user: &user,
        max_tokens: 200,
        session: None,
        model: None,
        constraint: None,
        images: &[],
    };
    provider
        .complete(req, None)
        .await
        .map(|c| verdict(&c.text))
        .map_err(|e| format!("the judge did not answer: {e}"))
}

/// The expectation's outcome from a verdict: `Err` says what came instead.
pub fn outcome(v: Result<Verdict, String>) -> Result<(), String> {
    match v? {
        Verdict::Yes(_) => Ok(()),
        Verdict::No(reason) => Err(format!("the judge said no: {reason}")),
        Verdict::Neither(text) => Err(format!(
            "the judge answered neither yes nor no: {}",
            super::expect::quote(&text)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_and_no_with_their_reasons() {
        assert_eq!(
            verdict("yes\nShe keeps her voice."),
            Verdict::Yes("She keeps her voice.".into())
        );
        assert_eq!(
            verdict("  **No.** She lectures — ça ne va pas."),
            Verdict::No("She lectures — ça ne va pas.".into())
        );
        assert_eq!(verdict("YES"), Verdict::Yes(String::new()));
        assert_eq!(
            verdict("No: l'anglais, pas le français"),
            Verdict::No("l'anglais, pas le français".into())
        );
    }

    #[test]
    fn anything_else_is_neither() {
        assert_eq!(
            verdict("Maybe, it depends."),
            Verdict::Neither("Maybe, it depends.".into())
        );
        assert_eq!(
            verdict("Yesterday she was kinder."),
            Verdict::Neither("Yesterday she was kinder.".into())
        );
        assert_eq!(verdict(""), Verdict::Neither(String::new()));
        assert_eq!(verdict("はい"), Verdict::Neither("はい".into()));
    }

    #[test]
    fn outcomes_say_why() {
        assert_eq!(outcome(Ok(Verdict::Yes("fine".into()))), Ok(()));
        assert_eq!(
            outcome(Ok(Verdict::No("too long".into()))),
            Err("the judge said no: too long".into())
        );
        let e = outcome(Ok(Verdict::Neither("perhaps".into()))).unwrap_err();
        assert_eq!(e, "the judge answered neither yes nor no: \"perhaps\"");
        assert_eq!(outcome(Err("timeout".into())), Err("timeout".into()));
    }

    #[test]
    fn the_question_carries_the_conversation_and_the_reply() {
        let q = question(
            &[("Tess".into(), "Bonjour ☕".into())],
            "Salut Tess",
            "Is it French?",
        );
        assert!(q.contains("Tess: Bonjour ☕\n"));
        assert!(q.contains("<reply>\nSalut Tess\n</reply>"));
        assert!(q.contains("Is it French?"));
    }
}
