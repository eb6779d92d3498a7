//! A GBNF reader for tests, independent of the code that writes the grammars: it parses a
//! grammar in llama.cpp's syntax (rules `name ::= …`, string literals with escapes, character
//! classes with ranges and `^`, groups, `|`, `?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`), says
//! whether a text is in its language, and writes random texts that are.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone)]
enum Item {
    Lit(Vec<char>),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Ref(String),
    Group(Vec<Vec<Rep>>),
}

#[derive(Debug, Clone)]
struct Rep {
    item: Item,
    min: usize,
    max: Option<usize>,
}

#[derive(Debug)]
pub struct Grammar {
    rules: HashMap<String, Vec<Vec<Rep>>>,
    pub names: Vec<String>,
}

struct Reader<'a> {
    chars: Vec<char>,
    at: usize,
    text: &'a str,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// Skips blanks and comments; line breaks too when `lines`.
    fn skip(&mut self, lines: bool) {
        while let Some(c) = self.peek() {
            if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.at += 1;
                }
            } else if c == ' ' || c == '\t' || (lines && (c == '\n' || c == '\r')) {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    fn fail(&self, what: &str) -> String {
        let shown: String = self.chars[self.at.min(self.chars.len())..]
            .iter()
            .take(40)
            .collect();
        format!("{what} at {} ({shown:?}) in\n{}", self.at, self.text)
    }

    fn name(&mut self) -> Result<String, String> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.fail("a rule name expected"));
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    fn escaped(&mut self) -> Result<char, String> {
        let c = self.peek().ok_or_else(|| self.fail("an escape cut off"))?;
        self.at += 1;
        let hex = |r: &mut Self, n: usize| -> Result<char, String> {
            let s: String = r.chars[r.at..(r.at + n).min(r.chars.len())]
                .iter()
                .collect();
            r.at += n;
            u32::from_str_radix(&s, 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| r.fail("a bad hex escape"))
        };
        Ok(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            '\\' | '"' | '[' | ']' | '-' | '^' => c,
            _ => return Err(self.fail("an unknown escape")),
        })
    }

    fn alternatives(&mut self, nested: bool) -> Result<Vec<Vec<Rep>>, String> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some('|') {
            self.at += 1;
            alts.push(self.sequence(nested)?);
        }
        Ok(alts)
    }

    fn sequence(&mut self, nested: bool) -> Result<Vec<Rep>, String> {
        let mut seq = Vec::new();
        loop {
            self.skip(nested);
            let item = match self.peek() {
                None | Some('|') | Some(')') | Some('\n') | Some('\r') => break,
                Some('"') => {
                    self.at += 1;
                    let mut lit = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.fail("an unclosed literal")),
                            Some('"') => {
                                self.at += 1;
                                break;
                            }
                            Some('\\') => {
                                self.at += 1;
                                lit.push(self.escaped()?);
                            }
                            Some(c) => {
                                self.at += 1;
                                lit.push(c);
                            }
                        }
                    }
                    Item::Lit(lit)
                }
                Some('[') => {
                    self.at += 1;
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.at += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        let c = match self.peek() {
                            None => return Err(self.fail("an unclosed class")),
                            Some(']') => {
                                self.at += 1;
                                break;
                            }
                            Some('\\') => {
                                self.at += 1;
                                self.escaped()?
                            }
                            Some(c) => {
                                self.at += 1;
                                c
                            }
                        };
                        if self.peek() == Some('-') && self.chars.get(self.at + 1) != Some(&']') {
                            self.at += 1;
                            let hi = match self.peek() {
                                Some('\\') => {
                                    self.at += 1;
                                    self.escaped()?
                                }
                                Some(h) => {
                                    self.at += 1;
                                    h
                                }
                                None => return Err(self.fail("a range cut off")),
                            };
                            ranges.push((c, hi));
                        } else {
                            ranges.push((c, c));
                        }
                    }
                    Item::Class { negated, ranges }
                }
                Some('(') => {
                    self.at += 1;
                    let alts = self.alternatives(true)?;
                    self.skip(true);
                    if self.peek() != Some(')') {
                        return Err(self.fail("`)` expected"));
                    }
                    self.at += 1;
                    Item::Group(alts)
                }
                Some(c) if c.is_ascii_alphanumeric() => Item::Ref(self.name()?),
                Some(_) => return Err(self.fail("an item expected")),
            };
            let (min, max) = match self.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    let close = self.chars[self.at..]
                        .iter()
                        .position(|&c| c == '}')
                        .ok_or_else(|| self.fail("an unclosed repetition"))?;
                    let inner: String = self.chars[self.at + 1..self.at + close].iter().collect();
                    self.at += close;
                    let num = |s: &str| {
                        s.trim()
                            .parse::<usize>()
                            .map_err(|_| self.fail("a bad repetition"))
                    };
                    match inner.split_once(',') {
                        None => {
                            let n = num(&inner)?;
                            (n, Some(n))
                        }
                        Some((lo, hi)) if hi.trim().is_empty() => (num(lo)?, None),
                        Some((lo, hi)) => (num(lo)?, Some(num(hi)?)),
                    }
                }
                _ => (1, Some(1)),
            };
            if (min, max) != (1, Some(1)) {
                self.at += 1;
            }
            seq.push(Rep { item, min, max });
        }
        Ok(seq)
    }
}

impl Grammar {
    /// Parses a grammar; every rule it names must be defined, and it must have a `root`.
    pub fn parse(text: &str) -> Result<Grammar, String> {
        let mut r = Reader {
            chars: text.chars().collect(),
            at: 0,
            text,
        };
        let mut rules = HashMap::new();
        let mut names = Vec::new();
        loop {
            r.skip(true);
            if r.peek().is_none() {
                break;
            }
            let name = r.name()?;
            r.skip(false);
            let arrow: String = r.chars[r.at..(r.at + 3).min(r.chars.len())]
                .iter()
                .collect();
            if arrow != "::=" {
                return Err(r.fail("`::=` expected"));
            }
            r.at += 3;
            let alts = r.alternatives(false)?;
            if rules.insert(name.clone(), alts).is_some() {
                return Err(format!("{name} is defined twice"));
            }
            names.push(name);
        }
        let g = Grammar { rules, names };
        if !g.rules.contains_key("root") {
            return Err("no root rule".into());
        }
        for alts in g.rules.values() {
            g.check_refs(alts)?;
        }
        Ok(g)
    }

    fn check_refs(&self, alts: &[Vec<Rep>]) -> Result<(), String> {
        for rep in alts.iter().flatten() {
            match &rep.item {
                Item::Ref(n) if !self.rules.contains_key(n) => {
                    return Err(format!("{n} is used but not defined"))
                }
                Item::Group(inner) => self.check_refs(inner)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether `text` is in the grammar's language.
    pub fn accepts(&self, text: &str) -> bool {
        let input: Vec<char> = text.chars().collect();
        let mut m = Matcher {
            g: self,
            input: &input,
            memo: HashMap::new(),
        };
        m.rule("root", 0).contains(&input.len())
    }

    /// The length in characters of the longest text in the language; `None` when there is
    /// no longest (an unbounded repetition, or a rule that refers to itself).
    pub fn longest(&self) -> Option<usize> {
        self.longest_rule("root", &mut Vec::new())
    }

    fn longest_rule<'a>(&'a self, name: &'a str, stack: &mut Vec<&'a str>) -> Option<usize> {
        if stack.contains(&name) {
            return None;
        }
        stack.push(name);
        let n = self.longest_alts(&self.rules[name], stack);
        stack.pop();
        n
    }

    fn longest_alts<'a>(&'a self, alts: &'a [Vec<Rep>], stack: &mut Vec<&'a str>) -> Option<usize> {
        let mut most = 0;
        for seq in alts {
            let mut n = 0;
            for rep in seq {
                let one = match &rep.item {
                    Item::Lit(l) => l.len(),
                    Item::Class { .. } => 1,
                    Item::Ref(name) => self.longest_rule(name, stack)?,
                    Item::Group(inner) => self.longest_alts(inner, stack)?,
                };
                if one > 0 {
                    n += rep.max? * one;
                }
            }
            most = most.max(n);
        }
        Some(most)
    }

    /// A random text in the language, from `seed`.
    pub fn generate(&self, seed: u64) -> String {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut out = String::new();
        self.gen_alts(&self.rules["root"], &mut rng, &mut out);
        out
    }

    fn gen_alts(&self, alts: &[Vec<Rep>], rng: &mut fastrand::Rng, out: &mut String) {
        let seq = &alts[rng.usize(..alts.len())];
        for rep in seq {
            let most = match &rep.item {
                // Text: short, but sometimes longer.
                Item::Class { .. } => rep
                    .max
                    .unwrap_or(usize::MAX)
                    .min(rep.min + if rng.u8(..) < 30 { 200 } else { 24 }),
                _ => rep.max.unwrap_or(rep.min + 3).min(rep.min + 3),
            };
            let n = rng.usize(rep.min..=most.max(rep.min));
            for _ in 0..n {
                match &rep.item {
                    Item::Lit(l) => out.extend(l),
                    Item::Class { negated, ranges } => out.push(pick(*negated, ranges, rng)),
                    Item::Ref(name) => self.gen_alts(&self.rules[name], rng, out),
                    Item::Group(alts) => self.gen_alts(alts, rng, out),
                }
            }
        }
    }
}

/// Characters a random text is made of: multi-byte, markup, blanks, entities' parts.
const POOL: &[char] = &[
    'a', 'b', 'Z', '0', '9', ' ', ' ', '\n', '\t', '.', ',', '?', '!', ':', ';', '&', '>', '"',
    '\'', '`', '*', '_', '/', '=', '{', '}', '[', ']', '#', '@', '|', 'é', 'ß', 'Ж', '日', '本',
    '🦀', '👍', '\u{200d}', '\u{301}', '“', '”', '…', '\u{a0}', '<',
];

fn pick(negated: bool, ranges: &[(char, char)], rng: &mut fastrand::Rng) -> char {
    let fits = |c: char| ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != negated;
    for _ in 0..200 {
        let c = POOL[rng.usize(..POOL.len())];
        if fits(c) {
            return c;
        }
    }
    // A positive class whose characters are not in the pool: its first range.
    let (lo, hi) = ranges[rng.usize(..ranges.len())];
    char::from_u32(rng.u32(lo as u32..=hi as u32)).unwrap_or(lo)
}

struct Matcher<'a> {
    g: &'a Grammar,
    input: &'a [char],
    memo: HashMap<(String, usize), BTreeSet<usize>>,
}

impl Matcher<'_> {
    fn rule(&mut self, name: &str, at: usize) -> BTreeSet<usize> {
        if let Some(done) = self.memo.get(&(name.to_string(), at)) {
            return done.clone();
        }
        // Guards left recursion (none of ours): a rule entered again at the same place fails.
        self.memo.insert((name.to_string(), at), BTreeSet::new());
        let alts = &self.g.rules[name];
        let ends = self.alts(alts, at);
        self.memo.insert((name.to_string(), at), ends.clone());
        ends
    }

    fn alts(&mut self, alts: &[Vec<Rep>], at: usize) -> BTreeSet<usize> {
        let mut ends = BTreeSet::new();
        for seq in alts {
            let mut here = BTreeSet::from([at]);
            for rep in seq {
                let mut next = BTreeSet::new();
                for p in here {
                    next.extend(self.rep(rep, p));
                }
                here = next;
                if here.is_empty() {
                    break;
                }
            }
            ends.extend(here);
        }
        ends
    }

    fn rep(&mut self, rep: &Rep, at: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        if rep.min == 0 {
            out.insert(at);
        }
        let mut current = BTreeSet::from([at]);
        let mut seen = BTreeSet::from([at]);
        let mut i = 0;
        while rep.max.is_none_or(|m| i < m) {
            i += 1;
            let mut next = BTreeSet::new();
            for p in &current {
                next.extend(self.item(&rep.item, *p));
            }
            if i >= rep.min {
                out.extend(next.iter().copied());
            }
            next.retain(|p| seen.insert(*p) || i < rep.min);
            if next.is_empty() {
                break;
            }
            current = next;
        }
        out
    }

    fn item(&mut self, item: &Item, at: usize) -> BTreeSet<usize> {
        match item {
            Item::Lit(l) => {
                if self.input[at..].starts_with(l) {
                    BTreeSet::from([at + l.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Item::Class { negated, ranges } => match self.input.get(at) {
                Some(&c) if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated => {
                    BTreeSet::from([at + 1])
                }
                _ => BTreeSet::new(),
            },
            Item::Ref(name) => self.rule(name, at),
            Item::Group(alts) => self.alts(alts, at),
        }
    }
}

#[test]
fn the_reader_reads_gbnf_and_decides_membership() {
    let g = Grammar::parse(
        "root ::= \"<a>\" text \"</a>\" ( \"\\n\" b ){0,2} # comment\ntext ::= [^<]{1,5}\nb ::= [0-9] | \"x\"+\n",
    )
    .unwrap();
    assert!(g.accepts("<a>hé</a>"));
    assert!(g.accepts("<a>12345</a>\n7\nxx"));
    assert!(!g.accepts("<a>123456</a>"), "bounded");
    assert!(!g.accepts("<a>a<b</a>"));
    assert!(!g.accepts("<a></a>"));
    assert!(!g.accepts("<a>x</a>\n1\n2\n3"));
    for seed in 0..50 {
        let t = g.generate(seed);
        assert!(g.accepts(&t), "{t:?}");
    }
    assert_eq!(g.longest(), None, "`\"x\"+` has no end");
    assert_eq!(
        Grammar::parse("root ::= \"é\"? [a-z]{2,4} (\"x\" | \"yy\")")
            .unwrap()
            .longest(),
        Some(7)
    );
    assert_eq!(Grammar::parse("root ::= [a-z]*").unwrap().longest(), None);
    assert!(Grammar::parse("root ::= missing").is_err());
    assert!(Grammar::parse("a ::= \"x\"").is_err());
}
