//! Images for the models that read them: a shared image's bytes checked, decoded within
//! bounds, scaled down and re-encoded to what a provider takes (`ImageLimits`), ready for
//! its wire format. Knows nothing of Slack or of where the bytes came from.
//!
//! The format is told by the bytes, never by a name or a MIME type. The header is read
//! first: an image over [`MAX_PIXELS`] (a decompression bomb: 50,000 × 50,000 pixels fit in
//! a small PNG) or with an edge over [`MAX_SOURCE_EDGE`] is refused before any pixel is decoded, and each decoder is held to
//! [`decode::MAX_DECODER_BYTES`] besides. Pixels go straight into a streaming resizer at the
//! fitted size, so memory is the fitted image plus what the format's decoder holds (a PNG
//! row; a JPEG scaled down by its DCT; a GIF's or WebP's frame). An image already within the
//! limits, of a type the provider takes, not animated and upright, is sent as it came (after
//! it decoded cleanly: a corrupt file never reaches a provider, which would refuse the turn).
//! A photo's EXIF orientation is applied to its pixels, since re-encoding drops the EXIF.

mod decode;
mod encode;
mod orient;
mod resize;

pub use decode::MAX_DECODER_BYTES;

/// The most pixels anima decodes from one image (40 MP: a 7,300 × 5,500 photo, a 1,440 ×
/// 27,000 page-long screenshot). Larger is refused as [`ImageError::TooLarge`].
pub const MAX_PIXELS: u64 = 40_000_000;

/// The longest edge any provider limit is taken at (JPEG's own limit is 65,535).
const MAX_EDGE: u32 = 16_384;

/// The longest edge anima decodes: a PNG may declare 2³¹ pixels on one edge, and a
/// 40,000,000 × 1 image (within [`MAX_PIXELS`], a few kilobytes of zeros) would make the
/// resizer's weights alone hundreds of megabytes. JPEG's, GIF's and WebP's own limit.
pub const MAX_SOURCE_EDGE: u32 = 65_535;

/// What a provider takes: the longest edge in pixels, the encoded size, the media types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    pub long_edge: u32,
    pub max_bytes: usize,
    pub media_types: &'static [&'static str],
}

/// An image ready for a provider: within its limits, of one of its media types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub media_type: String,
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

impl Image {
    /// About how many input tokens the image costs (see [`estimated_tokens`]).
    pub fn estimated_tokens(&self) -> u64 {
        estimated_tokens(self.width, self.height)
    }
}

/// Anthropic's published estimate of an image's input tokens, width × height / 750, at most
/// about 1,600 (a larger image is scaled down by the API to about 1.15 megapixels first).
/// Other providers count differently (OpenAI in 512-pixel tiles), but of the same order: the
/// inspector and the trace show it as an estimate.
pub fn estimated_tokens(width: u32, height: u32) -> u64 {
    (u64::from(width) * u64::from(height))
        .div_ceil(750)
        .min(ANTHROPIC_TOKEN_CAP)
}

const ANTHROPIC_TOKEN_CAP: u64 = 1_600;

/// Why an image cannot be shown to the model, in words for the soul and the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("not an image anima reads ({0})")]
    Unsupported(String),
    #[error("a corrupt or truncated image: {0}")]
    Corrupt(String),
    #[error("too large to decode ({width} × {height} pixels)")]
    TooLarge { width: u32, height: u32 },
}

/// The image in `bytes`, fitted to `limits`: PNG, JPEG, GIF (its first frame) or WebP, told
/// by its bytes; scaled down to `long_edge` (the aspect ratio kept) and encoded within
/// `max_bytes` as a type the provider takes, or passed through untouched when it already is.
pub fn prepare(bytes: &[u8], limits: &ImageLimits) -> Result<Image, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Corrupt("an empty file".into()));
    }
    let format =
        decode::Format::sniff(bytes).ok_or_else(|| ImageError::Unsupported(describe(bytes)))?;
    let header = decode::header(bytes, format)?;
    if u64::from(header.width) * u64::from(header.height) > MAX_PIXELS
        || header.width.max(header.height) > MAX_SOURCE_EDGE
    {
        return Err(ImageError::TooLarge {
            width: header.width,
            height: header.height,
        });
    }
    let long_edge = limits.long_edge.clamp(1, MAX_EDGE);
    let (width, height) = resize::fitted(header.width, header.height, long_edge);
    let decoded = decode::decode(bytes, &header, width, height)?;
    let media_type = format.media_type();
    let untouched = (width, height) == (header.width, header.height)
        && !decoded.animated
        && !decoded.turned
        && bytes.len() <= limits.max_bytes
        && limits.media_types.contains(&media_type);
    if untouched {
        return Ok(Image {
            media_type: media_type.to_string(),
            data: bytes.to_vec(),
            width,
            height,
        });
    }
    encode::fit(decoded.raster, header.lossless, limits)
}

/// What bytes that are no image anima reads seem to be, for the error.
fn describe(bytes: &[u8]) -> String {
    let at = |i: usize, sig: &[u8]| bytes.get(i..i + sig.len()) == Some(sig);
    let what = if at(0, b"%PDF") {
        "a PDF"
    } else if at(4, b"ftypheic") || at(4, b"ftypheix") || at(4, b"ftypmif1") {
        "a HEIC photo"
    } else if at(4, b"ftypavif") {
        "an AVIF image"
    } else if at(0, b"BM") {
        "a BMP image"
    } else if at(0, b"II*\0") || at(0, b"MM\0*") {
        "a TIFF image"
    } else if bytes.trim_ascii_start().starts_with(b"<") {
        "HTML or XML text"
    } else {
        "an unknown format"
    };
    what.to_string()
}

#[cfg(test)]
mod tests;
