//! Encoding a decoded image so that it fits a provider's bytes: PNG for what has
//! transparency or came lossless (screenshots, drawings: text stays crisp) when that fits;
//! else JPEG, its quality stepped down, then the image itself, until it fits.

use super::resize::Raster;
use super::{Image, ImageError, ImageLimits};

/// The JPEG qualities tried in turn: 85 looks like the original; 50 is still readable.
const QUALITIES: [u8; 4] = [85, 75, 62, 50];

/// Each further try at a smaller size keeps this share of the long edge.
const SHRINK: f64 = 0.75;

/// No image is made smaller than this on its long edge to fit.
const SMALLEST: u32 = 64;

pub fn png(r: &Raster) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    let failed = |e: png::EncodingError| ImageError::Corrupt(format!("cannot encode PNG: {e}"));
    {
        let mut e = png::Encoder::new(&mut out, r.width, r.height);
        e.set_color(if r.channels == 4 {
            png::ColorType::Rgba
        } else {
            png::ColorType::Rgb
        });
        e.set_depth(png::BitDepth::Eight);
        e.set_compression(png::Compression::Fast);
        let mut w = e.write_header().map_err(failed)?;
        w.write_image_data(&r.data).map_err(failed)?;
        w.finish().map_err(failed)?;
    }
    Ok(out)
}

pub fn jpeg(r: &Raster, quality: u8) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    let (w, h) = (
        u16::try_from(r.width).map_err(|_| too_large(r))?,
        u16::try_from(r.height).map_err(|_| too_large(r))?,
    );
    let color = if r.channels == 4 {
        jpeg_encoder::ColorType::Rgba
    } else {
        jpeg_encoder::ColorType::Rgb
    };
    jpeg_encoder::Encoder::new(&mut out, quality)
        .encode(&r.data, w, h, color)
        .map_err(|e| ImageError::Corrupt(format!("cannot encode JPEG: {e}")))?;
    Ok(out)
}

fn too_large(r: &Raster) -> ImageError {
    ImageError::TooLarge {
        width: r.width,
        height: r.height,
    }
}

/// `raster` encoded within `limits`; `lossless` when the source was.
pub fn fit(raster: Raster, lossless: bool, limits: &ImageLimits) -> Result<Image, ImageError> {
    let takes = |t: &str| limits.media_types.contains(&t);
    let (png_ok, jpeg_ok) = (takes("image/png"), takes("image/jpeg"));
    if !png_ok && !jpeg_ok {
        return Err(ImageError::Unsupported(
            "the provider takes neither PNG nor JPEG".into(),
        ));
    }
    let raster = if raster.channels == 4 && !raster.transparent() {
        Raster {
            data: raster
                .data
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2]])
                .collect(),
            channels: 3,
            ..raster
        }
    } else {
        raster
    };
    let prefer_png = png_ok && (lossless || raster.channels == 4 || !jpeg_ok);
    let mut current = raster;
    loop {
        if prefer_png {
            let data = png(&current)?;
            if data.len() <= limits.max_bytes {
                return Ok(image("image/png", data, &current));
            }
        }
        if jpeg_ok {
            let flat;
            let rgb = if current.channels == 4 {
                flat = current.clone().flatten();
                &flat
            } else {
                &current
            };
            for q in QUALITIES {
                let data = jpeg(rgb, q)?;
                if data.len() <= limits.max_bytes {
                    return Ok(image("image/jpeg", data, rgb));
                }
            }
        }
        let long = current.width.max(current.height);
        if long <= SMALLEST {
            return Err(ImageError::TooLarge {
                width: current.width,
                height: current.height,
            });
        }
        let (w, h) = super::resize::fitted(
            current.width,
            current.height,
            ((f64::from(long) * SHRINK) as u32).max(SMALLEST),
        );
        current = current.scaled(w, h);
    }
}

fn image(media_type: &str, data: Vec<u8>, r: &Raster) -> Image {
    Image {
        media_type: media_type.to_string(),
        data,
        width: r.width,
        height: r.height,
    }
}
