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

/// Parses a condition.
pub fn parse(src: &str) -> Result<Expr, SyntaxError> {
    let tokens = lex(src)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        len: src.chars().count(),
    };
    let e = p.or()?;
    match p.peek() {
        None => Ok(e),
        Some((col, t)) => Err(SyntaxError {
            column: col,
            message: format!("unexpected {t}"),
        }),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(f64),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Num(n) => write!(f, "number {n}"),
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Op(o) => write!(f, "`{o}`"),
            Tok::LParen => f.write_str("`(`"),
            Tok::RParen => f.write_str("`)`"),
            Tok::LBracket => f.write_str("`[`"),
            Tok::RBracket => f.write_str("`]`"),
            Tok::Comma => f.write_str("`,`"),
        }
    }
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, SyntaxError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |column: usize, message: String| SyntaxError {
        column: column + 1,
        message,
    };
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '"' | '\'' => {
                let quote = c;
                i += 1;
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None => return Err(err(start, "unterminated string".into())),
                        Some('\\') if chars.get(i + 1).is_some() => {
                            s.push(chars[i + 1]);
                            i += 2;
                        }
                        Some(ch) if *ch == quote => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(*ch);
                            i += 1;
                        }
                    }
                }
                out.push((start + 1, Tok::Str(s)));
                continue;
            }
            '(' => out.push((start + 1, Tok::LParen)),
            ')' => out.push((start + 1, Tok::RParen)),
            '[' => out.push((start + 1, Tok::LBracket)),
            ']' => out.push((start + 1, Tok::RBracket)),
            ',' => out.push((start + 1, Tok::Comma)),
            '=' | '!' | '<' | '>' => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let op = match two.as_str() {
                    "==" => "==",
                    "!=" => "!=",
                    "<=" => "<=",
                    ">=" => ">=",
                    _ if c == '<' => "<",
                    _ if c == '>' => ">",
                    _ => {
                        return Err(err(
                            start,
                            format!("`{c}` here; use ==, !=, <, <=, > or >="),
                        ))
                    }
                };
                i += op.len();
                out.push((start + 1, Tok::Op(op)));
                continue;
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                i += 1;
                while chars
                    .get(i)
                    .is_some_and(|d| d.is_ascii_digit() || *d == '.')
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let n = text
                    .parse()
                    .map_err(|_| err(start, format!("bad number `{text}`")))?;
                out.push((start + 1, Tok::Num(n)));
                continue;
            }
            c if c.is_alphabetic() || c == '_' => {
                while chars
                    .get(i)
                    .is_some_and(|d| d.is_alphanumeric() || *d == '_' || *d == '.')
                {
                    i += 1;
                }
                out.push((start + 1, Tok::Ident(chars[start..i].iter().collect())));
                continue;
            }
            other => return Err(err(start, format!("unexpected character `{other}`"))),
        }
        i += 1;
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(usize, Tok)>,
    pos: usize,
    len: usize,
}

impl Parser {
    fn peek(&self) -> Option<(usize, &Tok)> {
        self.tokens.get(self.pos).map(|(c, t)| (*c, t))
    }

    fn next(&mut self) -> Option<(usize, Tok)> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn end_col(&self) -> usize {
        self.len + 1
    }

    fn expect(&mut self, want: &Tok, what: &str) -> Result<(), SyntaxError> {
        match self.next() {
            Some((_, t)) if &t == want => Ok(()),
            Some((col, t)) => Err(SyntaxError {
                column: col,
                message: format!("expected {what}, found {t}"),
            }),
            None => Err(SyntaxError {
                column: self.end_col(),
                message: format!("expected {what} at the end"),
            }),
        }
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some((_, Tok::Ident(w))) if w == word)
    }

    fn or(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.and()?;
        while self.keyword("or") {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.not()?;
        while self.keyword("and") {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, SyntaxError> {
        if self.keyword("not") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Expr, SyntaxError> {
        let left = self.value()?;
        if let Some((_, Tok::Op(op))) = self.peek() {
            let op = match *op {
                "==" => Op::Eq,
                "!=" => Op::Ne,
                "<" => Op::Lt,
                "<=" => Op::Le,
                ">" => Op::Gt,
                _ => Op::Ge,
            };
            self.pos += 1;
            let right = self.value()?;
            return Ok(Expr::Cmp(Box::new(left), op, Box::new(right)));
        }
        if self.keyword("in") {
            self.pos += 1;
            self.expect(&Tok::LBracket, "`[` after `in`")?;
            let mut list = vec![self.value()?];
            while matches!(self.peek(), Some((_, Tok::Comma))) {
                self.pos += 1;
                list.push(self.value()?);
            }
            self.expect(&Tok::RBracket, "`]`")?;
            return Ok(Expr::In(Box::new(left), list));
        }
        Ok(left)
    }

    fn value(&mut self) -> Result<Expr, SyntaxError> {
        let Some((col, tok)) = self.next() else {
            return Err(SyntaxError {
                column: self.end_col(),
                message: "a condition ends too early".into(),
            });
        };
        match tok {
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Num(n) => Ok(Expr::Lit(Value::Num(n))),
            Tok::LParen => {
                let e = self.or()?;
                self.expect(&Tok::RParen, "`)`")?;
                Ok(e)
            }
            Tok::Ident(word) => self.name(col, &word),
            other => Err(SyntaxError {
                column: col,
                message: format!("unexpected {other}"),
            }),
        }
    }

    fn name(&mut self, col: usize, word: &str) -> Result<Expr, SyntaxError> {
        let name = match word {
            "true" => return Ok(Expr::Lit(Value::Bool(true))),
            "false" => return Ok(Expr::Lit(Value::Bool(false))),
            "null" => return Ok(Expr::Lit(Value::Null)),
            "query" => {
                self.expect(&Tok::LParen, "`(` after query")?;
                let q = match self.next() {
                    Some((_, Tok::Str(s))) if !s.trim().is_empty() => s,
                    Some((c, t)) => return Err(SyntaxError { column: c, message: format!("query takes a question in quotes, found {t}") }),
                    None => return Err(SyntaxError { column: self.end_col(), message: "query takes a question in quotes".into() }),
                };
                self.expect(&Tok::RParen, "`)`")?;
                return Ok(Expr::Query(q));
            }
            "user_model_check" => Name::UserModelCheck,
            "invocations" => Name::Invocations,
            "turns" => Name::Turns,
            "idle_minutes" => Name::IdleMinutes,
            "previous" => Name::Previous,
            "process" => Name::Process,
            "cognitive_state" => Name::CognitiveState,
            "mood" => Name::Inner("mood"),
            "energy" => Name::Inner("energy"),
            "relationship" => Name::Inner("relationship"),
            "leaning" => Name::Inner("leaning"),
            w => match w.split_once('.') {
                Some(("state", k)) if !k.is_empty() => Name::State(k.to_string()),
                Some(("params", k)) if !k.is_empty() => Name::Param(k.to_string()),
                _ => {
                    return Err(SyntaxError {
                        column: col,
                        message: format!(
                            "unknown name `{w}`; use state.<key>, params.<key>, query(\"…\"), user_model_check, invocations, turns, idle_minutes, previous, process, cognitive_state, mood, energy, relationship or leaning"
                        ),
                    })
                }
            },
        };
        Ok(Expr::Name(name))
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
