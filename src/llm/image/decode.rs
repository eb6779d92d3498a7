//! The formats anima reads, told by their bytes (never by a name or a MIME type): each header
//! read first, then the pixels decoded within bounds straight into a [`Resizer`] at the size
//! the image is fitted to. PNG streams row by row; a JPEG is decoded already scaled down
//! (by 1/2, 1/4 or 1/8 in its DCT) when it is much larger than needed; GIF gives its first
//! frame; WebP (lossy, lossless, animated: the first frame) decodes whole.

use std::io::Cursor;

use super::orient;
use super::resize::{Raster, Resizer};
use super::{ImageError, MAX_PIXELS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl Format {
    /// The format the bytes are in, from their signature.
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Format::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Format::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(Format::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(Format::Webp)
        } else {
            None
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::Gif => "image/gif",
            Format::Webp => "image/webp",
        }
    }
}

/// What a header says, read before any pixel is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    pub width: u32,
    pub height: u32,
    /// More than one frame (an animation: the model sees the first).
    pub animated: bool,
    /// A lossless source (a screenshot, a drawing): kept lossless when it fits.
    pub lossless: bool,
}

fn corrupt(e: impl std::fmt::Display) -> ImageError {
    ImageError::Corrupt(e.to_string())
}

/// The bytes' header. Nothing is decoded yet, and nothing the size of the image allocated.
pub fn header(bytes: &[u8], format: Format) -> Result<Header, ImageError> {
    let (width, height, animated, lossless) = match format {
        Format::Png => {
            let mut d = png::Decoder::new(Cursor::new(bytes));
            let info = d.read_header_info().map_err(corrupt)?;
            (
                info.width,
                info.height,
                info.animation_control.is_some(),
                true,
            )
        }
        Format::Jpeg => {
            let mut d = jpeg_decoder::Decoder::new(bytes);
            d.read_info().map_err(corrupt)?;
            let info = d.info().ok_or_else(|| corrupt("no frame header"))?;
            (u32::from(info.width), u32::from(info.height), false, false)
        }
        Format::Gif => {
            let d = gif_options().read_info(bytes).map_err(corrupt)?;
            // Whether there is a second frame is known only once the first is read.
            (u32::from(d.width()), u32::from(d.height()), false, true)
        }
        Format::Webp => {
            let mut d = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
            let (w, h) = d.dimensions();
            (w, h, d.is_animated(), !d.is_lossy())
        }
    };
    if width == 0 || height == 0 {
        return Err(corrupt(format!("an image of {width} × {height} pixels")));
    }
    Ok(Header {
        format,
        width,
        height,
        animated,
        lossless,
    })
}

/// The most a decoder may allocate for one image: four bytes a pixel at [`MAX_PIXELS`], with
/// room for its own buffers.
pub const MAX_DECODER_BYTES: usize = MAX_PIXELS as usize * 4 + (16 << 20);

fn gif_options() -> gif::DecodeOptions {
    let mut o = gif::DecodeOptions::new();
    o.set_color_output(gif::ColorOutput::RGBA);
    o.set_memory_limit(gif::MemoryLimit::Bytes(
        std::num::NonZeroU64::new(MAX_DECODER_BYTES as u64).expect("not zero"),
    ));
    o
}

/// A decoded image at its fitted size.
pub struct Decoded {
    pub raster: Raster,
    /// More than one frame (a GIF says so only once its first frame is read).
    pub animated: bool,
    /// Turned upright from how it was stored (a photo's EXIF orientation).
    pub turned: bool,
}

/// Decodes the image (its first frame), scaled to `width` × `height` on the way (as stored:
/// a photo turned upright after has them swapped).
pub fn decode(bytes: &[u8], h: &Header, width: u32, height: u32) -> Result<Decoded, ImageError> {
    let plain = |raster| Decoded {
        raster,
        animated: h.animated,
        turned: false,
    };
    match h.format {
        Format::Png => png_rows(bytes, width, height).map(plain),
        Format::Jpeg => jpeg(bytes, width, height),
        Format::Gif => gif_first_frame(bytes, width, height).map(|(raster, animated)| Decoded {
            raster,
            animated,
            turned: false,
        }),
        Format::Webp => webp(bytes, width, height).map(plain),
    }
}

/// Gray, gray+alpha, RGB or RGBA rows of 8 bits, into a resizer of RGB or RGBA.
fn feed(r: &mut Resizer, row: &[u8], from: usize, scratch: &mut Vec<u8>) {
    match from {
        3 | 4 => r.push(row),
        1 => {
            scratch.clear();
            scratch.extend(row.iter().flat_map(|&g| [g, g, g]));
            r.push(scratch);
        }
        _ => {
            scratch.clear();
            scratch.extend(row.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0], p[1]]));
            r.push(scratch);
        }
    }
}

fn png_rows(bytes: &[u8], width: u32, height: u32) -> Result<Raster, ImageError> {
    let mut d = png::Decoder::new_with_limits(
        Cursor::new(bytes),
        png::Limits {
            bytes: MAX_DECODER_BYTES,
        },
    );
    d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = d.read_info().map_err(corrupt)?;
    let (w, h, interlaced) = {
        let i = reader.info();
        (i.width, i.height, i.interlaced)
    };
    let from = reader.output_color_type().0.samples();
    let mut r = Resizer::new(w, h, width, height, if from % 2 == 0 { 4 } else { 3 });
    let mut scratch = Vec::new();
    if interlaced {
        // Adam7 passes come in an order of their own: the whole frame first.
        let size = reader.output_buffer_size().ok_or(ImageError::TooLarge {
            width: w,
            height: h,
        })?;
        let mut buf = vec![0; size];
        let out = reader.next_frame(&mut buf).map_err(corrupt)?;
        for row in buf.chunks_exact(out.line_size) {
            feed(&mut r, row, from, &mut scratch);
        }
    } else {
        while let Some(row) = reader.next_row().map_err(corrupt)? {
            feed(&mut r, row.data(), from, &mut scratch);
        }
    }
    Ok(r.finish())
}

fn jpeg(bytes: &[u8], width: u32, height: u32) -> Result<Decoded, ImageError> {
    let mut d = jpeg_decoder::Decoder::new(bytes);
    d.set_max_decoding_buffer_size(MAX_DECODER_BYTES);
    // The DCT scale (1/2, 1/4, 1/8) that leaves at least nine tenths of the long edge wanted:
    // a 4,032-pixel photo halved to 2,016 serves a limit of 2,048 without decoding it whole.
    let clamp = |n: u32| (n - n / 10).clamp(1, u32::from(u16::MAX)) as u16;
    let (w, h) = d.scale(clamp(width), clamp(height)).map_err(corrupt)?;
    let (w, h) = (u32::from(w), u32::from(h));
    let (width, height) = if w.max(h) < width.max(height) {
        (w, h)
    } else {
        (width, height)
    };
    let pixels = d.decode().map_err(corrupt)?;
    let info = d.info().ok_or_else(|| corrupt("no frame header"))?;
    let orientation = d.exif_data().map_or(1, orient::exif_orientation);
    let upright = |raster| Decoded {
        raster: orient::apply(raster, orientation),
        animated: false,
        turned: orientation != 1,
    };
    if info.pixel_format == jpeg_decoder::PixelFormat::RGB24 {
        return Ok(upright(super::resize::in_place(
            pixels,
            (w, h),
            (width, height),
            3,
        )));
    }
    let mut r = Resizer::new(w, h, width, height, 3);
    let mut scratch = Vec::new();
    let line = |px: usize| w as usize * px;
    match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => {
            for row in pixels.chunks_exact(line(1)) {
                feed(&mut r, row, 1, &mut scratch);
            }
        }
        jpeg_decoder::PixelFormat::L16 => {
            for row in pixels.chunks_exact(line(2)) {
                let gray: Vec<u8> = row.chunks_exact(2).map(|p| p[0]).collect();
                feed(&mut r, &gray, 1, &mut scratch);
            }
        }
        jpeg_decoder::PixelFormat::RGB24 => {
            for row in pixels.chunks_exact(line(3)) {
                r.push(row);
            }
        }
        jpeg_decoder::PixelFormat::CMYK32 => {
            for row in pixels.chunks_exact(line(4)) {
                scratch.clear();
                scratch.extend(row.chunks_exact(4).flat_map(|p| {
                    let k = u32::from(p[3]);
                    [p[0], p[1], p[2]].map(|c| (u32::from(c) * k / 255) as u8)
                }));
                r.push(&scratch);
            }
        }
    }
    drop(pixels);
    Ok(upright(r.finish()))
}

/// The first frame, on the logical screen (transparent where the frame does not cover it),
/// and whether more frames follow.
fn gif_first_frame(bytes: &[u8], width: u32, height: u32) -> Result<(Raster, bool), ImageError> {
    let mut d = gif_options().read_info(bytes).map_err(corrupt)?;
    let (sw, sh) = (usize::from(d.width()), usize::from(d.height()));
    let frame = d
        .read_next_frame()
        .map_err(corrupt)?
        .ok_or_else(|| corrupt("a GIF without a frame"))?;
    let (fx, fy) = (usize::from(frame.left), usize::from(frame.top));
    let fw = usize::from(frame.width);
    let mut r = Resizer::new(sw as u32, sh as u32, width, height, 4);
    let mut line = vec![0u8; sw * 4];
    for y in 0..sh {
        line.fill(0);
        // (A frame may lie partly, or wholly, off the screen.)
        if y >= fy && y < fy + usize::from(frame.height) && fx < sw {
            let src = &frame.buffer[(y - fy) * fw * 4..(y - fy + 1) * fw * 4];
            let n = fw.min(sw.saturating_sub(fx));
            line[fx * 4..(fx + n) * 4].copy_from_slice(&src[..n * 4]);
        }
        r.push(&line);
    }
    let more = d.next_frame_info().map_err(corrupt)?.is_some();
    Ok((r.finish(), more))
}

fn webp(bytes: &[u8], width: u32, height: u32) -> Result<Raster, ImageError> {
    let mut d = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
    d.set_memory_limit(MAX_DECODER_BYTES);
    let (w, h) = d.dimensions();
    let channels = if d.has_alpha() { 4 } else { 3 };
    let size = d.output_buffer_size().ok_or(ImageError::TooLarge {
        width: w,
        height: h,
    })?;
    let mut buf = vec![0; size];
    d.read_image(&mut buf).map_err(corrupt)?;
    let mut r = Resizer::new(w, h, width, height, channels);
    for row in buf.chunks_exact(w as usize * channels) {
        r.push(row);
    }
    Ok(r.finish())
}
