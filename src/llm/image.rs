//! Images for the models that read them: a shared image's bytes checked, decoded within
//! bounds, scaled down and re-encoded to what a provider takes (`ImageLimits`), ready for
//! its wire format. Knows nothing of Slack or of where the bytes came from.

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

/// The image in `bytes`, fitted to `limits`.
pub fn prepare(bytes: &[u8], limits: &ImageLimits) -> Result<Image, ImageError> {
    let _ = (bytes, limits);
    Err(ImageError::Unsupported("images are not decoded yet".into()))
}
