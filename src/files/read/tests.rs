use super::*;

const LIMITS: Limits = Limits {
    max_bytes: 1000,
    max_files: 5,
    text_chars: 20,
    images: true,
};

fn file(name: &str, mimetype: &str, size: u64) -> Attachment {
    Attachment {
        id: "F1".into(),
        name: name.into(),
        mimetype: mimetype.into(),
        filetype: String::new(),
        size,
        url: "https://files.slack.com/x".into(),
    }
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

#[test]
fn a_file_over_the_limit_is_named_without_a_fetch() {
    let big = file("clip.mp4", "video/mp4", 40 * 1024 * 1024);
    let seen = plan(&big, &LIMITS).unwrap();
    assert_eq!(seen.kind, Kind::Video);
    assert_eq!(
        seen.about(),
        "a 40 MB video, not read: larger than the 1000 bytes limit"
    );
}

#[test]
fn video_and_sound_are_named_and_images_too_when_the_model_cannot_see() {
    assert!(plan(&file("a.mp3", "audio/mpeg", 10), &LIMITS).is_some());
    assert!(plan(&file("a.png", "image/png", 10), &LIMITS).is_none());
    let blind = Limits {
        images: false,
        ..LIMITS
    };
    let seen = plan(&file("screenshot.png", "image/png", 10), &blind).unwrap();
    assert!(
        seen.about().contains("you cannot see it"),
        "{}",
        seen.about()
    );
    assert!(plan(&file("notes.txt", "text/plain", 10), &LIMITS).is_none());
}

#[test]
fn text_is_inlined_and_cut_on_a_character_boundary_with_a_note() {
    let seen = read(
        &file("notes.md", "text/markdown", 0),
        Fetched::Bytes("héllo wörld, ünïcödé everywhere".as_bytes().to_vec()),
        &LIMITS,
    );
    let Read::Text { text, cut } = &seen.read else {
        panic!("{seen:?}")
    };
    assert_eq!(text.chars().count(), 20);
    assert_eq!(text, "héllo wörld, ünïcödé");
    assert!(cut.as_ref().unwrap().contains("20 of its 31"));
    assert_eq!(seen.kind, Kind::Text);
}

#[test]
fn the_bytes_decide_not_the_declared_type() {
    // A PNG that says it is text, text that says it is a PNG, a PDF called .txt.
    let png = read(
        &file("a.txt", "text/plain", 0),
        Fetched::Bytes(PNG.to_vec()),
        &LIMITS,
    );
    assert_eq!(png.kind, Kind::Image);
    assert!(matches!(png.read, Read::Image(_)));
    let text = read(
        &file("a.png", "image/png", 0),
        Fetched::Bytes(b"just words".to_vec()),
        &LIMITS,
    );
    assert!(matches!(text.read, Read::Text { .. }), "{text:?}");
    let pdf = read(
        &file("a.txt", "text/plain", 0),
        Fetched::Bytes(super::pdf::sample(&["Inside"])),
        &LIMITS,
    );
    assert_eq!(pdf.kind, Kind::Pdf);
    assert!(matches!(&pdf.read, Read::Text { text, .. } if text.contains("Inside")));
}

#[test]
fn binary_and_invalid_utf8_are_handled() {
    let bin = read(
        &file("a.bin", "application/octet-stream", 0),
        Fetched::Bytes(vec![0, 1, 2, 3, 255, 254]),
        &LIMITS,
    );
    assert!(matches!(bin.read, Read::Named(_)), "{bin:?}");
    // One stray byte in a long text is a replacement character, not a refusal.
    let mut bytes = b"a log line that is long enough to carry one bad byte: ".to_vec();
    bytes.push(0xFF);
    bytes.extend_from_slice(b" and more words after it, many more words");
    let mostly = read(
        &file("x.log", "", 0),
        Fetched::Bytes(bytes),
        &Limits {
            text_chars: 1000,
            ..LIMITS
        },
    );
    assert!(
        matches!(&mostly.read, Read::Text { text, .. } if text.contains('\u{FFFD}')),
        "{mostly:?}"
    );
}

#[test]
fn a_web_page_where_a_file_was_expected_and_a_failed_fetch_are_lines() {
    let html = read(
        &file("report.csv", "text/csv", 0),
        Fetched::Bytes(b"<!DOCTYPE html><html><body>Sign in</body></html>".to_vec()),
        &LIMITS,
    );
    assert!(html.about().contains("web page"), "{}", html.about());
    let failed = read(
        &file("report.csv", "text/csv", 12),
        Fetched::Failed("Slack answered 404".into()),
        &LIMITS,
    );
    assert_eq!(
        failed.about(),
        "a 12 bytes text file, not read: the download failed (Slack answered 404)"
    );
    let big = read(
        &file("big.log", "text/plain", 0),
        Fetched::TooBig { read: 1001 },
        &LIMITS,
    );
    assert_eq!(
        big.about(),
        "a text file, not read: larger than the 1000 bytes limit"
    );
}

#[test]
fn a_corrupt_pdf_is_named_in_words() {
    let seen = read(
        &file("broken.pdf", "application/pdf", 0),
        Fetched::Bytes(b"%PDF-1.7\nthis is not really a pdf".to_vec()),
        &LIMITS,
    );
    assert_eq!(seen.kind, Kind::Pdf);
    assert!(matches!(seen.read, Read::Named(_)), "{seen:?}");
}

#[test]
fn memory_keeps_the_name_kind_and_size_never_the_bytes() {
    let seen = read(
        &file("screenshot.png", "image/png", 0),
        Fetched::Bytes(PNG.to_vec()),
        &LIMITS,
    );
    assert_eq!(
        seen.remembered(),
        "[shared a file: screenshot.png (an image, 16 bytes)]"
    );
}
