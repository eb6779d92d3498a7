//! What the fake model servers saw of images: each image block (Anthropic) or `image_url`
//! data URL (OpenAI-compatible) of a request, decoded back to its media type, size in bytes
//! and dimensions (read from the image's own header, by the format's decoder).

use base64::Engine as _;
use serde_json::Value;

/// One image a request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenImage {
    /// The media type the request declared (`image/png` …).
    pub media_type: String,
    /// The decoded (not base64) size.
    pub bytes: usize,
    /// From the image's header; (0, 0) when it is no image the decoders read.
    pub width: u32,
    pub height: u32,
    /// The format the bytes are actually in (`image/png` …), whatever was declared.
    pub sniffed: Option<&'static str>,
}

/// The images in a request body (every message, in order), in either provider's format.
pub fn in_body(body: &Value) -> Vec<SeenImage> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for part in m["content"].as_array().into_iter().flatten() {
            let (media_type, data) = match part["type"].as_str() {
                Some("image") => (
                    part["source"]["media_type"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    part["source"]["data"].as_str().unwrap_or("").to_string(),
                ),
                Some("image_url") => {
                    let url = part["image_url"]["url"].as_str().unwrap_or("");
                    let rest = url.strip_prefix("data:").unwrap_or("");
                    let (media_type, data) = rest.split_once(";base64,").unwrap_or(("", ""));
                    (media_type.to_string(), data.to_string())
                }
                _ => continue,
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap_or_default();
            let (width, height, sniffed) = dimensions(&bytes);
            out.push(SeenImage {
                media_type,
                bytes: bytes.len(),
                width,
                height,
                sniffed,
            });
        }
    }
    out
}

/// An image's dimensions and format from its header.
pub fn dimensions(bytes: &[u8]) -> (u32, u32, Option<&'static str>) {
    use std::io::Cursor;
    if bytes.starts_with(b"\x89PNG") {
        let mut d = png::Decoder::new(Cursor::new(bytes));
        if let Ok(i) = d.read_header_info() {
            return (i.width, i.height, Some("image/png"));
        }
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        let mut d = jpeg_decoder::Decoder::new(bytes);
        if let (Ok(()), Some(i)) = (d.read_info(), d.info()) {
            return (i.width.into(), i.height.into(), Some("image/jpeg"));
        }
    } else if bytes.starts_with(b"GIF8") {
        if let Ok(d) = gif::DecodeOptions::new().read_info(bytes) {
            return (d.width().into(), d.height().into(), Some("image/gif"));
        }
    } else if bytes.get(8..12) == Some(b"WEBP") {
        if let Ok(d) = image_webp::WebPDecoder::new(Cursor::new(bytes)) {
            let (w, h) = d.dimensions();
            return (w, h, Some("image/webp"));
        }
    }
    (0, 0, None)
}
