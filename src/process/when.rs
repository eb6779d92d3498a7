//! The condition language of a transition's `when`.
//!
//! ```text
//! expr    := or
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | compare
//! compare := value (("==" | "!=" | "<" | "<=" | ">" | ">=") value | "in" list)?
//! value   := "string" | number | true | false | name | query("question") | "(" expr ")"
//! list    := "[" value ("," value)* "]"
//! name    := state.<key> | params.<key> | user_model_check | invocations | turns
//!          | idle_minutes | previous | process | cognitive_state
//!          | mood | energy | relationship | leaning
//! ```
//!
//! Names read the turn just parsed: `state.emotionalState` is the soul state after this turn's
//! update; `query("Is the user angry?")` is that mental query's answer (false if unanswered);
//! `user_model_check` its answer; `invocations` how many times this process has run in the
//! thread (this run included); `turns` the thread's turns (this one included); `idle_minutes`
//! the quiet before this message; `previous` the process before this one; `cognitive_state`
//! the soul's state as the turn began (`"WORK"`, `"PLAY"` …; compared ignoring case); `mood`,
//! `energy`, `relationship` and `leaning` the inner life as the message was taken in, one word
//! each (`psyche::Words`: `mood == "low"`, `relationship in ["warm", "fond"]`; null when the
//! psyche could not be read). Pure: parsing and evaluation do no I/O and never panic.

use std::collections::BTreeMap;
use std::fmt;

use crate::psyche::Words;

mod syntax;

pub use syntax::parse;

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(Box<Expr>, Op, Box<Expr>),
    In(Box<Expr>, Vec<Expr>),
    Lit(Value),
    Name(Name),
    Query(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Name {
    State(String),
    Param(String),
    UserModelCheck,
    Invocations,
    Turns,
    IdleMinutes,
    Previous,
    Process,
    CognitiveState,
    /// One of `psyche::Words::NAMES`.
    Inner(&'static str),
}

/// A value during evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Num(n) => *n != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Null => false,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Num(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Null => f.write_str("null"),
        }
    }
}

/// What a condition can read.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub state: BTreeMap<String, String>,
    pub params: BTreeMap<String, serde_json::Value>,
    pub queries: Vec<(String, Option<bool>)>,
    pub user_model_check: Option<bool>,
    pub invocations: u64,
    pub turns: u64,
    pub idle_minutes: f64,
    pub previous: Option<String>,
    pub process: String,
    pub cognitive_state: String,
    /// The inner life in words (`psyche::Words`); `None`: not known.
    pub inner: Option<Words>,
}

/// A syntax error at a character column of the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl Expr {
    /// The mental-query questions this condition reads.
    pub fn queries(&self, out: &mut Vec<String>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) | Expr::Cmp(a, _, b) => {
                a.queries(out);
                b.queries(out);
            }
            Expr::Not(a) => a.queries(out),
            Expr::In(a, list) => {
                a.queries(out);
                list.iter().for_each(|e| e.queries(out));
            }
            Expr::Query(q) => {
                if !out.contains(q) {
                    out.push(q.clone())
                }
            }
            Expr::Lit(_) | Expr::Name(_) => {}
        }
    }

    /// Whether it reads what an answer gives only after its dialogue: the soul state after
    /// the update, or the user-model check.
    pub fn reads_late(&self) -> bool {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) | Expr::Cmp(a, _, b) => {
                a.reads_late() || b.reads_late()
            }
            Expr::Not(a) => a.reads_late(),
            Expr::In(a, list) => a.reads_late() || list.iter().any(Expr::reads_late),
            Expr::Name(Name::State(_) | Name::UserModelCheck) => true,
            Expr::Lit(_) | Expr::Name(_) | Expr::Query(_) => false,
        }
    }

    pub fn holds(&self, f: &Facts) -> bool {
        self.eval(f).truthy()
    }

    fn eval(&self, f: &Facts) -> Value {
        match self {
            Expr::Or(a, b) => Value::Bool(a.holds(f) || b.holds(f)),
            Expr::And(a, b) => Value::Bool(a.holds(f) && b.holds(f)),
            Expr::Not(a) => Value::Bool(!a.holds(f)),
            Expr::Cmp(a, op, b) => Value::Bool(compare(&a.eval(f), *op, &b.eval(f))),
            Expr::In(a, list) => {
                let v = a.eval(f);
                Value::Bool(list.iter().any(|e| compare(&v, Op::Eq, &e.eval(f))))
            }
            Expr::Lit(v) => v.clone(),
            Expr::Query(q) => Value::Bool(
                f.queries
                    .iter()
                    .rev()
                    .find(|(question, _)| question.trim().eq_ignore_ascii_case(q.trim()))
                    .and_then(|(_, a)| *a)
                    .unwrap_or(false),
            ),
            Expr::Name(n) => match n {
                Name::State(k) => f
                    .state
                    .get(k)
                    .map_or(Value::Null, |v| Value::Str(v.clone())),
                Name::Param(k) => match f.params.get(k) {
                    Some(serde_json::Value::Bool(b)) => Value::Bool(*b),
                    Some(serde_json::Value::Number(n)) => Value::Num(n.as_f64().unwrap_or(0.0)),
                    Some(serde_json::Value::String(s)) => Value::Str(s.clone()),
                    Some(other) => Value::Str(other.to_string()),
                    None => Value::Null,
                },
                Name::UserModelCheck => f.user_model_check.map_or(Value::Null, Value::Bool),
                Name::Invocations => Value::Num(f.invocations as f64),
                Name::Turns => Value::Num(f.turns as f64),
                Name::IdleMinutes => Value::Num(f.idle_minutes),
                Name::Previous => f.previous.clone().map_or(Value::Null, Value::Str),
                Name::Process => Value::Str(f.process.clone()),
                Name::CognitiveState => Value::Str(f.cognitive_state.clone()),
                Name::Inner(n) => f
                    .inner
                    .and_then(|w| w.get(n))
                    .filter(|w| !w.is_empty())
                    .map_or(Value::Null, |w| Value::Str(w.to_string())),
            },
        }
    }
}

fn compare(a: &Value, op: Op, b: &Value) -> bool {
    let ord = match (a, b) {
        (Value::Num(x), Value::Num(y)) => x.partial_cmp(y),
        (Value::Str(x), Value::Str(y)) => Some(x.to_lowercase().cmp(&y.to_lowercase())),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(std::cmp::Ordering::Equal),
        _ => None,
    };
    match (op, ord) {
        (Op::Eq, o) => o == Some(std::cmp::Ordering::Equal),
        (Op::Ne, o) => o != Some(std::cmp::Ordering::Equal),
        (_, None) => false,
        (Op::Lt, Some(o)) => o.is_lt(),
        (Op::Le, Some(o)) => o.is_le(),
        (Op::Gt, Some(o)) => o.is_gt(),
        (Op::Ge, Some(o)) => o.is_ge(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        let mut f = Facts {
            invocations: 2,
            turns: 5,
            idle_minutes: 30.0,
            previous: Some("greeting".into()),
            process: "main".into(),
            cognitive_state: "PLAY".into(),
            user_model_check: Some(true),
            ..Facts::default()
        };
        f.state.insert("emotionalState".into(), "frustrated".into());
        f.params
            .insert("wasProvoked".into(), serde_json::json!(true));
        f.queries.push(("Is the user angry?".into(), Some(true)));
        f
    }

    fn holds(src: &str) -> bool {
        parse(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .holds(&facts())
    }

    #[test]
    fn conditions_read_the_inner_life_in_words_and_null_when_it_is_not_known() {
        let mut f = facts();
        f.inner = Some(Words {
            mood: "low",
            energy: "tired",
            relationship: "fond",
            leaning: "guarded",
        });
        let holds_in = |src: &str, f: &Facts| parse(src).unwrap().holds(f);
        assert!(holds_in(r#"mood == "LOW" and energy == "tired""#, &f));
        assert!(holds_in(r#"relationship in ["warm", "fond"]"#, &f));
        assert!(holds_in(r#"leaning != "open""#, &f));
        assert!(!holds_in(r#"mood == "happy""#, &f));
        f.inner = None;
        assert!(!holds_in(r#"mood == "low""#, &f));
        assert!(holds_in("mood == null and relationship == null", &f));
        for name in Words::NAMES {
            assert_eq!(parse(name).unwrap(), Expr::Name(Name::Inner(name)));
        }
        let err = parse("moods == 1").unwrap_err();
        assert!(
            err.message
                .contains("mood, energy, relationship or leaning"),
            "{err}"
        );
    }

    #[test]
    fn conditions_read_the_turn() {
        assert!(holds(r#"state.emotionalState == "frustrated""#));
        assert!(holds(
            r#"state.emotionalState in ["neutral", "FRUSTRATED"]"#
        ));
        assert!(!holds(r#"state.emotionalState in ["neutral", "engaged"]"#));
        assert!(
            holds(r#"query("is the user angry?")"#),
            "questions match case-insensitively"
        );
        assert!(
            !holds(r#"query("Did they say goodbye?")"#),
            "unanswered is false"
        );
        assert!(holds(
            "invocations >= 2 and turns > 4 and idle_minutes <= 30"
        ));
        assert!(holds(
            r#"previous == "greeting" and process != "frustrated""#
        ));
        assert!(holds("params.wasProvoked and user_model_check"));
        assert!(holds("not (turns < 3) or false"));
        assert!(!holds("state.missing == \"x\""));
        assert!(holds("state.missing == null"));
        assert!(holds("true"));
        assert!(
            holds(r#"cognitive_state == "play""#),
            "state names ignore case"
        );
        assert!(!holds(r#"cognitive_state == "WORK""#));
    }

    #[test]
    fn syntax_errors_name_the_column() {
        for (src, col, needle) in [
            ("state.emotionalState = \"x\"", 22, "=="),
            ("turns >", 8, "ends too early"),
            ("query(angry)", 7, "question in quotes"),
            ("moods == 1", 1, "unknown name `moods`"),
            ("\"open", 1, "unterminated"),
            ("turns > 1 turns", 11, "unexpected"),
            ("state.x in [\"a\" \"b\"]", 17, "expected `]`"),
        ] {
            let e = parse(src).unwrap_err();
            assert_eq!(e.column, col, "{src}: {e}");
            assert!(e.message.contains(needle), "{src}: {e}");
        }
    }

    #[test]
    fn the_questions_a_condition_asks() {
        let e = parse(r#"query("A?") or (query("B?") and not query("A?"))"#).unwrap();
        let mut q = Vec::new();
        e.queries(&mut q);
        assert_eq!(q, vec!["A?".to_string(), "B?".to_string()]);
    }
}
