//! A photo's EXIF orientation: cameras store pixels as the sensor saw them and say in EXIF
//! how to turn them. Re-encoding drops the EXIF, so the turn is made on the pixels: a
//! portrait photo reaches the model upright.

use super::resize::Raster;

/// The orientation (1 to 8; 1 is upright) in EXIF data that starts at its TIFF header.
pub fn exif_orientation(tiff: &[u8]) -> u8 {
    let big = match tiff.get(..4) {
        Some(b"MM\0*") => true,
        Some(b"II*\0") => false,
        _ => return 1,
    };
    let u16_at = |i: usize| {
        tiff.get(i..i + 2).map(|b| {
            let b = [b[0], b[1]];
            if big {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        })
    };
    let u32_at = |i: usize| {
        tiff.get(i..i + 4).map(|b| {
            let b = [b[0], b[1], b[2], b[3]];
            if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        })
    };
    let Some(ifd) = u32_at(4).map(|o| o as usize) else {
        return 1;
    };
    let count = u16_at(ifd).unwrap_or(0) as usize;
    (0..count)
        .map(|i| ifd + 2 + i * 12)
        .find(|&e| u16_at(e) == Some(0x0112))
        .and_then(|e| u16_at(e + 8))
        .filter(|o| (1..=8).contains(o))
        .map_or(1, |o| o as u8)
}

/// `r` turned upright from `orientation`.
pub fn apply(r: Raster, orientation: u8) -> Raster {
    if !(2..=8).contains(&orientation) {
        return r;
    }
    let (w, h, c) = (r.width as usize, r.height as usize, r.channels);
    let swap = orientation >= 5;
    let (ow, oh) = if swap { (h, w) } else { (w, h) };
    let mut data = vec![0u8; r.data.len()];
    for y in 0..oh {
        for x in 0..ow {
            // Where the upright pixel (x, y) is in the stored image.
            let (sx, sy) = match orientation {
                2 => (w - 1 - x, y),
                3 => (w - 1 - x, h - 1 - y),
                4 => (x, h - 1 - y),
                5 => (y, x),
                6 => (y, h - 1 - x),
                7 => (w - 1 - y, h - 1 - x),
                _ => (w - 1 - y, x),
            };
            let from = (sy * w + sx) * c;
            data[(y * ow + x) * c..][..c].copy_from_slice(&r.data[from..from + c]);
        }
    }
    Raster {
        width: ow as u32,
        height: oh as u32,
        channels: c,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiff(big: bool, orientation: u16) -> Vec<u8> {
        let u16b = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut t = if big {
            b"MM\0*".to_vec()
        } else {
            b"II*\0".to_vec()
        };
        t.extend(u32b(8));
        t.extend(u16b(2));
        // An unrelated tag (ImageWidth), then Orientation (SHORT, one value).
        t.extend([u16b(0x0100), u16b(3)].concat());
        t.extend(u32b(1));
        t.extend(u32b(640));
        t.extend([u16b(0x0112), u16b(3)].concat());
        t.extend(u32b(1));
        t.extend([u16b(orientation).as_slice(), &[0, 0]].concat());
        t
    }

    #[test]
    fn the_orientation_is_read_in_either_byte_order() {
        assert_eq!(exif_orientation(&tiff(false, 6)), 6);
        assert_eq!(exif_orientation(&tiff(true, 8)), 8);
        assert_eq!(exif_orientation(&tiff(true, 9)), 1);
        assert_eq!(exif_orientation(b"II*\0\xff\xff\xff\xff"), 1);
        assert_eq!(exif_orientation(b""), 1);
    }

    #[test]
    fn a_photo_turned_by_90_degrees_is_upright() {
        // 3 × 2, pixels numbered in the red channel.
        let r = Raster {
            width: 3,
            height: 2,
            channels: 3,
            data: (1..=6).flat_map(|i| [i, 0, 0]).collect(),
        };
        let red = |r: &Raster| r.data.chunks(3).map(|p| p[0]).collect::<Vec<_>>();
        // 6: stored turned 90° anticlockwise; shown turned clockwise.
        let up = apply(r.clone(), 6);
        assert_eq!((up.width, up.height), (2, 3));
        assert_eq!(red(&up), [4, 1, 5, 2, 6, 3]);
        assert_eq!(red(&apply(r.clone(), 3)), [6, 5, 4, 3, 2, 1]);
        assert_eq!(red(&apply(r.clone(), 8)), [3, 6, 2, 5, 1, 4]);
        assert_eq!(apply(r.clone(), 1), r);
    }
}
