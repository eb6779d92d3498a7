//! `prepare` on real images made here: each format scaled with its aspect kept, within the
//! bytes; passed through when it already fits; bombs, corrupt and lying files refused.

use super::*;

const ANY: ImageLimits = ImageLimits {
    long_edge: 200,
    max_bytes: 5 << 20,
    media_types: &["image/png", "image/jpeg", "image/gif", "image/webp"],
};

/// A photo-like RGB image: gradients and noise (which JPEG cannot squeeze away).
fn photo(w: u32, h: u32) -> Vec<u8> {
    let mut seed = 0x2545_f491_u32;
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let n = seed % 48;
            data.extend([
                ((x * 200 / w) + n) as u8,
                ((y * 200 / h) + n) as u8,
                (((x + y) * 100 / (w + h)) + n) as u8,
            ]);
        }
    }
    data
}

fn png_of(w: u32, h: u32, color: png::ColorType, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(color);
    e.set_depth(png::BitDepth::Eight);
    let mut wr = e.write_header().unwrap();
    wr.write_image_data(data).unwrap();
    wr.finish().unwrap();
    out
}

fn jpeg_of(w: u32, h: u32, q: u8) -> Vec<u8> {
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, q)
        .encode(
            &photo(w, h),
            w as u16,
            h as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
    out
}

/// (width, height) of an encoded PNG or JPEG, read by the format's own decoder.
fn dimensions(img: &Image) -> (u32, u32) {
    match img.media_type.as_str() {
        "image/png" => {
            let mut d = png::Decoder::new(std::io::Cursor::new(&img.data));
            let i = d.read_header_info().unwrap();
            (i.width, i.height)
        }
        "image/jpeg" => {
            let mut d = jpeg_decoder::Decoder::new(&img.data[..]);
            d.decode().unwrap();
            let i = d.info().unwrap();
            (u32::from(i.width), u32::from(i.height))
        }
        other => panic!("unexpected media type {other}"),
    }
}

#[test]
fn a_photo_is_scaled_to_the_long_edge_as_a_jpeg_with_its_aspect_kept() {
    let img = prepare(&jpeg_of(800, 600, 90), &ANY).unwrap();
    assert_eq!(img.media_type, "image/jpeg");
    assert_eq!((img.width, img.height), (200, 150));
    assert_eq!(dimensions(&img), (200, 150));
    let tall = prepare(&jpeg_of(300, 900, 90), &ANY).unwrap();
    assert_eq!((tall.width, tall.height), (67, 200));
}

#[test]
fn a_screenshot_stays_a_png_and_keeps_its_colours() {
    let (w, h) = (640, 320);
    let mut data = Vec::new();
    for y in 0..h {
        for x in 0..w {
            data.extend(if (x / 80 + y / 80) % 2 == 0 {
                [20, 40, 200]
            } else {
                [250, 250, 250]
            });
        }
    }
    let img = prepare(&png_of(w, h, png::ColorType::Rgb, &data), &ANY).unwrap();
    assert_eq!(img.media_type, "image/png");
    assert_eq!(dimensions(&img), (200, 100));
    let mut d = png::Decoder::new(std::io::Cursor::new(&img.data))
        .read_info()
        .unwrap();
    let mut buf = vec![0; d.output_buffer_size().unwrap()];
    d.next_frame(&mut buf).unwrap();
    // The middle of the first square is still its blue.
    let px = &buf[(12 * 200 + 12) * 3..][..3];
    assert_eq!(px, [20, 40, 200]);
}

#[test]
fn an_image_within_the_limits_passes_untouched() {
    let bytes = jpeg_of(160, 120, 80);
    let img = prepare(&bytes, &ANY).unwrap();
    assert_eq!(img.data, bytes);
    assert_eq!(
        (img.media_type.as_str(), img.width, img.height),
        ("image/jpeg", 160, 120)
    );
    // Of a type the provider does not take, it is re-encoded at the same size.
    let png_only = ImageLimits {
        media_types: &["image/png"],
        ..ANY
    };
    let img = prepare(&bytes, &png_only).unwrap();
    assert_eq!(
        (img.media_type.as_str(), img.width, img.height),
        ("image/png", 160, 120)
    );
}

#[test]
fn the_quality_and_then_the_size_step_down_to_fit_the_bytes() {
    let bytes = jpeg_of(600, 600, 98);
    let limits = ImageLimits {
        long_edge: 600,
        max_bytes: 12_000,
        ..ANY
    };
    assert!(bytes.len() > limits.max_bytes);
    let img = prepare(&bytes, &limits).unwrap();
    assert!(img.data.len() <= 12_000, "{} bytes", img.data.len());
    assert_eq!(img.media_type, "image/jpeg");
    assert!(img.width < 600 && img.width == img.height);
    assert_eq!(dimensions(&img), (img.width, img.height));
}

#[test]
fn transparency_stays_in_a_png_and_is_flattened_for_a_jpeg_only_provider() {
    let (w, h) = (400, 400);
    let data: Vec<u8> = (0..w * h)
        .flat_map(|i| {
            if i % 3 == 0 {
                [255, 0, 0, 0]
            } else {
                [0, 128, 0, 255]
            }
        })
        .collect();
    let bytes = png_of(w, h, png::ColorType::Rgba, &data);
    let img = prepare(&bytes, &ANY).unwrap();
    assert_eq!(img.media_type, "image/png");
    assert_eq!(dimensions(&img), (200, 200));
    let jpeg_only = ImageLimits {
        media_types: &["image/jpeg"],
        ..ANY
    };
    let img = prepare(&bytes, &jpeg_only).unwrap();
    assert_eq!(
        (img.media_type.as_str(), dimensions(&img)),
        ("image/jpeg", (200, 200))
    );
}

#[test]
fn an_animated_gif_gives_its_first_frame() {
    let mut bytes = Vec::new();
    {
        let mut e = gif::Encoder::new(&mut bytes, 300, 150, &[]).unwrap();
        for color in [[255u8, 0, 0], [0, 0, 255]] {
            let indices = vec![0u8; 300 * 150];
            let frame = gif::Frame {
                width: 300,
                height: 150,
                buffer: std::borrow::Cow::Borrowed(&indices),
                palette: Some([color, [0, 0, 0]].concat()),
                ..gif::Frame::default()
            };
            e.write_frame(&frame).unwrap();
        }
    }
    let img = prepare(&bytes, &ANY).unwrap();
    assert_eq!((img.width, img.height), (200, 100));
    assert_ne!(
        img.media_type, "image/gif",
        "an animation is never passed on"
    );
    let rgb = resize_probe(&img);
    assert_eq!(
        rgb,
        [255, 0, 0],
        "the first frame (red), not the second (blue)"
    );
}

/// The colour at the centre of a PNG or JPEG.
fn resize_probe(img: &Image) -> [u8; 3] {
    let (w, h) = (img.width as usize, img.height as usize);
    let (buf, c) = match img.media_type.as_str() {
        "image/png" => {
            let mut d = png::Decoder::new(std::io::Cursor::new(&img.data))
                .read_info()
                .unwrap();
            let mut buf = vec![0; d.output_buffer_size().unwrap()];
            let info = d.next_frame(&mut buf).unwrap();
            (buf, info.color_type.samples())
        }
        _ => (
            jpeg_decoder::Decoder::new(&img.data[..]).decode().unwrap(),
            3,
        ),
    };
    let p = &buf[((h / 2) * w + w / 2) * c..][..3];
    [p[0], p[1], p[2]]
}

#[test]
fn a_webp_is_read_and_scaled() {
    let (w, h) = (300, 150);
    let mut bytes = Vec::new();
    image_webp::WebPEncoder::new(&mut bytes)
        .encode(&photo(w, h), w, h, image_webp::ColorType::Rgb8)
        .unwrap();
    let img = prepare(&bytes, &ANY).unwrap();
    assert_eq!((img.width, img.height), (200, 100));
    assert_eq!(dimensions(&img), (200, 100));
}

/// A PNG whose header says `w` × `h` and whose data is a few bytes: what a bomb looks like
/// before its (tiny, highly compressed) pixels are inflated.
fn png_header_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut out = png_of(1, 1, png::ColorType::Rgb, &[0, 0, 0]);
    // IHDR's width and height sit at bytes 16..24; its CRC at 29..33.
    out[16..20].copy_from_slice(&w.to_be_bytes());
    out[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&out[12..29]);
    out[29..33].copy_from_slice(&crc.to_be_bytes());
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_decompression_bomb_is_refused_from_its_header() {
    let bomb = png_header_claiming(50_000, 50_000);
    assert!(bomb.len() < 100);
    assert_eq!(
        prepare(&bomb, &ANY),
        Err(ImageError::TooLarge {
            width: 50_000,
            height: 50_000
        })
    );
    // Even under the pixel limit, no decoder may allocate more than its bound, and that bound
    // is far below what the bomb would take (10 GB as RGBA).
    const { assert!(MAX_DECODER_BYTES < 256 << 20) };
    const { assert!((MAX_PIXELS as usize) * 4 < MAX_DECODER_BYTES) };
    // A GIF's screen of 65,535 × 65,535 with one tiny frame on it.
    let mut gif = Vec::new();
    {
        let mut e = gif::Encoder::new(&mut gif, u16::MAX, u16::MAX, &[]).unwrap();
        let frame = gif::Frame {
            width: 1,
            height: 1,
            buffer: std::borrow::Cow::Borrowed(&[0]),
            palette: Some(vec![0, 0, 0]),
            ..gif::Frame::default()
        };
        e.write_frame(&frame).unwrap();
    }
    assert_eq!(
        prepare(&gif, &ANY),
        Err(ImageError::TooLarge {
            width: 65_535,
            height: 65_535
        })
    );
}

#[test]
fn a_png_one_pixel_high_and_forty_million_wide_is_refused_from_its_header() {
    // Within the pixel limit, but its resizer weights alone would be hundreds of megabytes.
    let thin = png_header_claiming(40_000_000, 1);
    assert_eq!(
        prepare(&thin, &ANY),
        Err(ImageError::TooLarge {
            width: 40_000_000,
            height: 1
        })
    );
    let tall = png_header_claiming(1, MAX_SOURCE_EDGE + 1);
    assert!(matches!(
        prepare(&tall, &ANY),
        Err(ImageError::TooLarge { .. })
    ));
}

#[test]
fn truncated_and_corrupt_images_are_corrupt_with_a_reason() {
    let png = png_of(300, 200, png::ColorType::Rgb, &photo(300, 200));
    for cut in [png.len() / 2, 40, 20] {
        let e = prepare(&png[..cut], &ANY).unwrap_err();
        assert!(
            matches!(e, ImageError::Corrupt(ref why) if !why.is_empty()),
            "{cut}: {e:?}"
        );
    }
    let jpeg = jpeg_of(320, 240, 85);
    let e = prepare(&jpeg[..jpeg.len() / 3], &ANY).unwrap_err();
    assert!(matches!(e, ImageError::Corrupt(_)), "{e:?}");
    let mut garbled = png.clone();
    garbled[60..200].fill(0xAB);
    assert!(matches!(
        prepare(&garbled, &ANY),
        Err(ImageError::Corrupt(_))
    ));
    assert_eq!(
        prepare(b"", &ANY),
        Err(ImageError::Corrupt("an empty file".into()))
    );
}

#[test]
fn the_bytes_say_what_a_file_is_whatever_it_was_called() {
    // A JPEG sent as "screenshot.png" is read, and sent on, as the JPEG it is.
    let img = prepare(&jpeg_of(100, 100, 80), &ANY).unwrap();
    assert_eq!(img.media_type, "image/jpeg");
    for (bytes, what) in [
        (b"%PDF-1.7\n...".as_slice(), "a PDF"),
        (b"<!DOCTYPE html><html>", "HTML or XML text"),
        (b"\0\0\0\x18ftypheic\0\0\0\0", "a HEIC photo"),
        (b"just some text", "an unknown format"),
    ] {
        assert_eq!(
            prepare(bytes, &ANY),
            Err(ImageError::Unsupported(what.into()))
        );
    }
}

#[test]
fn tokens_are_estimated_as_anthropic_publishes_them() {
    assert_eq!(estimated_tokens(200, 100), 27);
    assert_eq!(estimated_tokens(1092, 1092), 1590);
    assert_eq!(
        estimated_tokens(1568, 1176),
        1600,
        "capped: the API scales it down"
    );
}

#[test]
fn a_photo_stored_on_its_side_reaches_the_model_upright() {
    // EXIF (little-endian TIFF): one entry, Orientation = 6 (turn clockwise to show).
    let mut exif = b"II*\0".to_vec();
    exif.extend(8u32.to_le_bytes());
    exif.extend(1u16.to_le_bytes());
    exif.extend([0x12, 0x01, 3, 0]);
    exif.extend(1u32.to_le_bytes());
    exif.extend([6, 0, 0, 0]);
    exif.extend(0u32.to_le_bytes());
    let sideways = |w: u32, h: u32| {
        let mut out = Vec::new();
        let mut e = jpeg_encoder::Encoder::new(&mut out, 85);
        e.add_exif_metadata(&exif).unwrap();
        e.encode(
            &photo(w, h),
            w as u16,
            h as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
        out
    };
    let img = prepare(&sideways(300, 200), &ANY).unwrap();
    assert_eq!((img.width, img.height), (133, 200));
    assert_eq!(dimensions(&img), (133, 200));
    // Even within the limits it is turned, not passed on with an orientation a model may
    // not apply.
    let small = sideways(160, 120);
    let img = prepare(&small, &ANY).unwrap();
    assert_ne!(img.data, small);
    assert_eq!(dimensions(&img), (120, 160));
}

#[test]
fn a_gif_frame_off_its_screen_is_no_panic() {
    let mut bytes = Vec::new();
    {
        let mut e = gif::Encoder::new(&mut bytes, 40, 30, &[]).unwrap();
        let indices = vec![0u8; 20 * 20];
        let frame = gif::Frame {
            left: 100,
            top: 20,
            width: 20,
            height: 20,
            buffer: std::borrow::Cow::Borrowed(&indices),
            palette: Some(vec![255, 0, 0]),
            ..gif::Frame::default()
        };
        e.write_frame(&frame).unwrap();
    }
    // Either read (a transparent screen) or refused as corrupt: never a panic.
    match prepare(&bytes, &ANY) {
        Ok(img) => assert_eq!((img.width, img.height), (40, 30)),
        Err(e) => assert!(matches!(e, ImageError::Corrupt(_)), "{e:?}"),
    }
}
