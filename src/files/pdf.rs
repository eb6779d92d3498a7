//! A PDF's text, within bounds: at most `MAX_PAGES` pages read, each page's content inflated
//! to at most `MAX_PAGE_BYTES`, all objects loaded at most `MAX_LOADED_BYTES` together, the
//! reading stopped after `MAX_READING`, the text cut at the character budget. A corrupt,
//! encrypted or hostile PDF is an error in words, never a panic (the parser's own panics are
//! caught). Pure: the bytes are in memory.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lopdf::{Object, ObjectId};

/// The most pages whose text is read (a 10,000-page PDF costs no more than this).
pub const MAX_PAGES: usize = 200;
/// The most bytes one page's content may inflate to (a compression bomb stops here).
const MAX_PAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most bytes any stream may inflate to while the document is loaded.
const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The most bytes the loaded objects may hold together: a small file of many object streams,
/// each inflating to `MAX_STREAM_BYTES`, is refused here instead of filling the memory.
const MAX_LOADED_BYTES: usize = 64 * 1024 * 1024;
/// The longest the pages' text is read for: pages after it are left unread (a page tree
/// pointing every page at one heavy stream costs a turn no more than this).
const MAX_READING: Duration = Duration::from_secs(10);

thread_local! {
    /// What the objects loaded so far hold, on this thread (the loader calls a plain `fn`).
    static LOADED: Cell<usize> = const { Cell::new(0) };
}

/// The text read, and how much of the document it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub text: String,
    pub pages_read: usize,
    pub pages: usize,
    /// The text was cut at the budget.
    pub cut: bool,
}

impl Text {
    /// A note for the soul when not all of it was read.
    pub fn note(&self) -> Option<String> {
        if self.pages_read < self.pages {
            Some(format!(
                "cut: the text of its first {} of {} pages",
                self.pages_read, self.pages
            ))
        } else if self.cut {
            Some("cut: its text was longer than anima reads of one file".into())
        } else {
            None
        }
    }
}

/// The text of the PDF in `bytes`, at most `max_chars` characters.
pub fn text(bytes: &[u8], max_chars: usize) -> Result<Text, String> {
    let run = std::panic::catch_unwind(|| extract(bytes, max_chars));
    run.unwrap_or_else(|_| Err("the PDF reader gave up on it".into()))
}

/// The loader's filter: keeps each object while all of them together stay within
/// `MAX_LOADED_BYTES`, and drops every object after that (the load is then refused).
fn within_budget(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    let loaded = LOADED.with(|l| {
        let total = l.get().saturating_add(size(object));
        l.set(total);
        total
    });
    (loaded <= MAX_LOADED_BYTES).then(|| (id, object.clone()))
}

/// About how many bytes an object holds.
fn size(object: &Object) -> usize {
    match object {
        Object::String(bytes, _) | Object::Name(bytes) => bytes.len(),
        Object::Stream(stream) => stream.content.len() + dict_size(&stream.dict),
        Object::Array(items) => items.iter().map(size).sum::<usize>() + 16,
        Object::Dictionary(dict) => dict_size(dict),
        _ => 16,
    }
}

fn dict_size(dict: &lopdf::Dictionary) -> usize {
    dict.iter().map(|(k, v)| k.len() + size(v)).sum::<usize>() + 16
}

fn extract(bytes: &[u8], max_chars: usize) -> Result<Text, String> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        filter: Some(within_budget),
        ..Default::default()
    };
    LOADED.with(|l| l.set(0));
    let loaded = lopdf::Document::load_mem_with_options(bytes, options);
    if LOADED.with(Cell::get) > MAX_LOADED_BYTES {
        return Err(format!(
            "a PDF whose objects hold more than {} MB: not read",
            MAX_LOADED_BYTES >> 20
        ));
    }
    let doc = loaded.map_err(|e| format!("a corrupt PDF: {}", short(&e.to_string())))?;
    if doc.is_encrypted() {
        return Err("an encrypted PDF".into());
    }
    let pages: BTreeMap<u32, _> = doc.get_pages();
    if pages.is_empty() {
        return Err("a PDF without pages (corrupt?)".into());
    }
    let mut out = Text {
        text: String::new(),
        pages_read: 0,
        pages: pages.len(),
        cut: false,
    };
    let mut chars = 0;
    let began = Instant::now();
    for number in pages.keys().take(MAX_PAGES) {
        if began.elapsed() > MAX_READING {
            break;
        }
        // A page that cannot be read is skipped: the others may still say something.
        let page = doc
            .extract_text_with_limit(&[*number], MAX_PAGE_BYTES)
            .unwrap_or_default();
        out.pages_read += 1;
        let room = max_chars - chars;
        let (kept, cut) = super::read::cut_chars(&page, room);
        chars += kept.chars().count();
        out.text.push_str(&kept);
        if cut.is_some() || chars >= max_chars {
            out.cut = cut.is_some();
            // Pages after this one were not read.
            break;
        }
    }
    if out.cut {
        out.pages_read = out.pages;
    }
    Ok(out)
}

/// An error's words, at most a line.
fn short(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    super::read::cut_chars(line, 120).0
}

/// A small, well-formed PDF with one page per text (Helvetica, uncompressed), for the tests
/// and benchmarks that need one. Texts must not hold `(`, `)` or `\`.
#[doc(hidden)]
pub fn sample(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 pages, 3 font, then a page and its contents per page.
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_string(),
    ];
    for (i, text) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {} 0 R /Resources << /Font << /F1 3 0 R >> >> >>",
            5 + 2 * i
        ));
        let content = format!("BT /F1 12 Tf 72 712 Td ({text}) Tj ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pdfs_text_is_read_page_by_page() {
        let t = text(&sample(&["Hello from page one", "And page two"]), 10_000).unwrap();
        assert!(t.text.contains("Hello from page one"), "{t:?}");
        assert!(t.text.contains("And page two"), "{t:?}");
        assert_eq!((t.pages_read, t.pages, t.cut), (2, 2, false));
        assert_eq!(t.note(), None);
    }

    #[test]
    fn a_pdf_with_many_pages_is_read_only_to_the_bound() {
        let texts: Vec<String> = (0..MAX_PAGES + 50).map(|i| format!("page {i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let t = text(&sample(&refs), 1_000_000).unwrap();
        assert_eq!((t.pages_read, t.pages), (MAX_PAGES, MAX_PAGES + 50));
        assert!(!t.text.contains(&format!("page {}", MAX_PAGES + 1)));
        assert!(t.note().unwrap().contains(&format!("first {MAX_PAGES} of")));
    }

    #[test]
    fn the_objects_loaded_are_bounded_together_not_only_one_by_one() {
        LOADED.with(|l| l.set(0));
        let big = || {
            Object::String(
                vec![b'a'; MAX_LOADED_BYTES / 2 - 1024],
                lopdf::StringFormat::Literal,
            )
        };
        assert!(within_budget((1, 0), &mut big()).is_some());
        assert!(within_budget((2, 0), &mut big()).is_some());
        assert!(
            within_budget((3, 0), &mut big()).is_none(),
            "over the budget together"
        );
        assert!(within_budget((4, 0), &mut Object::Integer(1)).is_none());
        // Each document starts from nothing.
        let t = text(&sample(&["Hello again"]), 100).unwrap();
        assert!(t.text.contains("Hello again"), "{t:?}");
    }

    #[test]
    fn a_pdfs_text_stops_at_the_budget_on_a_character_boundary() {
        let t = text(&sample(&["abcdefghij", "klmnop"]), 4).unwrap();
        assert_eq!(t.text, "abcd");
        assert!(t.cut);
        assert!(t.note().is_some());
    }

    #[test]
    fn corrupt_and_truncated_pdfs_are_errors_in_words() {
        let whole = sample(&["Hello"]);
        for bad in [
            b"%PDF-1.4\n garbage".to_vec(),
            whole[..whole.len() / 2].to_vec(),
            b"%PDF-".to_vec(),
            Vec::new(),
        ] {
            match text(&bad, 100) {
                Err(e) => assert!(!e.is_empty()),
                // A lenient reader may recover a truncated file: what it found is bounded.
                Ok(t) => assert!(t.text.chars().count() <= 100),
            }
        }
    }
}
