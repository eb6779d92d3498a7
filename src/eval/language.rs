//! Which language a reply is in, told well enough for an eval: by its script for the
//! languages with one of their own, by its commonest small words for those written in Latin
//! letters. Pure; a guess it cannot make is `None`, never a wrong name.

/// A language an eval can expect a reply in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    English,
    French,
    German,
    Spanish,
    Italian,
    Portuguese,
    Dutch,
    Russian,
    Greek,
    Arabic,
    Japanese,
    Chinese,
    Korean,
}

use Language::*;

const ALL: [(Language, &str); 13] = [
    (English, "en"),
    (French, "fr"),
    (German, "de"),
    (Spanish, "es"),
    (Italian, "it"),
    (Portuguese, "pt"),
    (Dutch, "nl"),
    (Russian, "ru"),
    (Greek, "el"),
    (Arabic, "ar"),
    (Japanese, "ja"),
    (Chinese, "zh"),
    (Korean, "ko"),
];

/// The small words that give a Latin-script language away.
const WORDS: [(Language, &[&str]); 7] = [
    (
        English,
        &[
            "the", "and", "is", "you", "to", "of", "it", "that", "what", "are", "i", "my", "your",
            "this", "with", "have", "not", "do", "hello", "thanks",
        ],
    ),
    (
        French,
        &[
            "le", "la", "les", "et", "est", "vous", "je", "tu", "une", "des", "du", "que", "qui",
            "pas", "ce", "dans", "pour", "avec", "mais", "suis", "bonjour", "merci", "oui", "très",
        ],
    ),
    (
        German,
        &[
            "der", "die", "das", "und", "ist", "ich", "du", "sie", "nicht", "ein", "eine", "zu",
            "mit", "es", "auf", "wie", "was", "bin", "sind", "hallo", "danke", "ja",
        ],
    ),
    (
        Spanish,
        &[
            "el", "los", "las", "y", "es", "que", "en", "una", "no", "por", "con", "para", "estoy",
            "eres", "hola", "gracias", "sí", "pero", "muy", "cómo", "qué",
        ],
    ),
    (
        Italian,
        &[
            "il", "lo", "gli", "è", "di", "che", "non", "per", "sono", "sei", "ciao", "grazie",
            "mi", "ti", "ma", "come", "della", "anche",
        ],
    ),
    (
        Portuguese,
        &[
            "os", "é", "em", "um", "uma", "não", "com", "sou", "você", "olá", "obrigado",
            "obrigada", "muito", "como", "está", "isso",
        ],
    ),
    (
        Dutch,
        &[
            "het", "een", "en", "ik", "je", "jij", "niet", "van", "dat", "wat", "met", "zijn",
            "op", "voor", "hallo", "dank", "maar", "ook",
        ],
    ),
];

impl Language {
    /// The language an ISO 639-1 code names (`fr`), any case.
    pub fn from_code(code: &str) -> Option<Language> {
        let code = code.trim().to_ascii_lowercase();
        ALL.iter().find(|(_, c)| *c == code).map(|(l, _)| *l)
    }

    pub fn code(self) -> &'static str {
        ALL.iter().find(|(l, _)| *l == self).map_or("?", |(_, c)| c)
    }

    /// Every code an eval may name.
    pub fn codes() -> Vec<&'static str> {
        ALL.iter().map(|(_, c)| *c).collect()
    }
}

/// The language `text` is in, when it can be told.
pub fn detect(text: &str) -> Option<Language> {
    if let Some(l) = by_script(text) {
        return Some(l);
    }
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let mut scores: Vec<(Language, usize)> = WORDS
        .iter()
        .map(|(l, list)| (*l, words.iter().filter(|w| list.contains(w)).count()))
        .collect();
    scores.sort_by_key(|s| std::cmp::Reverse(s.1));
    match scores[..] {
        [(l, best), (_, next), ..] if best > 0 && best > next => Some(l),
        _ => None,
    }
}

/// A language its letters give away: more than half of them in its script.
fn by_script(text: &str) -> Option<Language> {
    let (mut letters, mut kana, mut han, mut hangul) = (0usize, 0usize, 0usize, 0usize);
    let (mut cyrillic, mut greek, mut arabic) = (0usize, 0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        match c as u32 {
            0x3040..=0x30FF => kana += 1,
            0x4E00..=0x9FFF | 0x3400..=0x4DBF => han += 1,
            0xAC00..=0xD7AF | 0x1100..=0x11FF => hangul += 1,
            0x0400..=0x04FF => cyrillic += 1,
            0x0370..=0x03FF => greek += 1,
            0x0600..=0x06FF => arabic += 1,
            _ => {}
        }
    }
    let most = |n: usize| n * 2 > letters;
    if kana > 0 && most(kana + han) {
        Some(Japanese)
    } else if most(han) {
        Some(Chinese)
    } else if most(hangul) {
        Some(Korean)
    } else if most(cyrillic) {
        Some(Russian)
    } else if most(greek) {
        Some(Greek)
    } else if most(arabic) {
        Some(Arabic)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_script_languages_by_their_small_words() {
        assert_eq!(
            detect("Bonjour ! Je suis très contente de vous voir."),
            Some(French)
        );
        assert_eq!(detect("Hello, what is the plan for today?"), Some(English));
        assert_eq!(
            detect("Hallo, ich bin nicht sicher, was das ist."),
            Some(German)
        );
        assert_eq!(
            detect("¡Hola! ¿Cómo estás? Estoy muy bien, gracias."),
            Some(Spanish)
        );
        assert_eq!(
            detect("Ciao, come stai? Sono contenta di sentirti."),
            Some(Italian)
        );
        assert_eq!(
            detect("Olá, você está bem? Muito obrigado."),
            Some(Portuguese)
        );
    }

    #[test]
    fn scripts_of_their_own_and_mixed_text() {
        assert_eq!(detect("こんにちは、元気ですか？"), Some(Japanese));
        assert_eq!(detect("你好，今天怎么样？"), Some(Chinese));
        assert_eq!(detect("안녕하세요, 잘 지내요?"), Some(Korean));
        assert_eq!(detect("Привет, как дела? OK"), Some(Russian));
        assert_eq!(detect("Γεια σου, τι κάνεις;"), Some(Greek));
        assert_eq!(detect("مرحبا كيف حالك"), Some(Arabic));
    }

    #[test]
    fn what_cannot_be_told_is_none() {
        assert_eq!(detect(""), None);
        assert_eq!(detect("42 🦀 !!"), None);
        assert_eq!(detect("Zzyzx qwv"), None);
    }

    #[test]
    fn codes_round_trip() {
        for code in Language::codes() {
            assert_eq!(Language::from_code(code).unwrap().code(), code);
        }
        assert_eq!(Language::from_code(" FR "), Some(French));
        assert_eq!(Language::from_code("xx"), None);
    }
}
