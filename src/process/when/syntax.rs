//! The condition language's text: the lexer and the recursive-descent parser that turn a
//! `when` into an `Expr`, or a `SyntaxError` at a column. Evaluation is `when`'s; pure, and
//! never panics.

use std::fmt;

use super::{Expr, Name, Op, SyntaxError, Value};

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
