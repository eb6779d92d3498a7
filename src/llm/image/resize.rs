//! Scaling down, one source row at a time: each row is filtered horizontally as it arrives and
//! kept only while an output row still needs it, so a decoder that gives rows (PNG) never
//! holds the whole source image, and one that gives a buffer holds nothing more than it.
//! Catmull-Rom (bicubic) weights widened by the scale factor, so a large reduction averages
//! every source pixel (no aliasing) and text stays sharp. Alpha is premultiplied while
//! filtering, so transparent pixels lend no colour to their neighbours.

use std::collections::VecDeque;

/// Pixels as the encoders take them: 8-bit RGB or RGBA, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    /// 3 (RGB) or 4 (RGBA).
    pub channels: usize,
    pub data: Vec<u8>,
}

impl Raster {
    /// Whether some pixel is not fully opaque.
    pub fn transparent(&self) -> bool {
        self.channels == 4 && self.data.chunks_exact(4).any(|p| p[3] != 255)
    }

    /// RGB, an RGBA raster composed over white.
    pub fn flatten(self) -> Raster {
        if self.channels == 3 {
            return self;
        }
        let data = self
            .data
            .chunks_exact(4)
            .flat_map(|p| {
                let a = u32::from(p[3]);
                let over = move |c: u8| ((u32::from(c) * a + 255 * (255 - a) + 127) / 255) as u8;
                [over(p[0]), over(p[1]), over(p[2])]
            })
            .collect();
        Raster {
            channels: 3,
            data,
            ..self
        }
    }

    /// The same image scaled to `width` × `height`.
    pub fn scaled(&self, width: u32, height: u32) -> Raster {
        let mut r = Resizer::new(self.width, self.height, width, height, self.channels);
        let row = self.width as usize * self.channels;
        for line in self.data.chunks_exact(row) {
            r.push(line);
        }
        r.finish()
    }
}

/// `width` × `height` scaled down (never up) so that its longer edge is at most `long_edge`,
/// the aspect ratio kept.
pub fn fitted(width: u32, height: u32, long_edge: u32) -> (u32, u32) {
    let long = width.max(height);
    if long <= long_edge || long == 0 {
        return (width, height);
    }
    let scale = f64::from(long_edge) / f64::from(long);
    let side = |n: u32| ((f64::from(n) * scale).round() as u32).clamp(1, long_edge);
    (side(width), side(height))
}

/// For each output coordinate, the first source index and the weights from there.
struct Weights {
    start: Vec<usize>,
    taps: usize,
    weights: Vec<f32>,
}

impl Weights {
    fn new(src: u32, dst: u32) -> Weights {
        let scale = (f64::from(src) / f64::from(dst)).max(1.0);
        let support = 2.0 * scale;
        let taps = (support.ceil() as usize) * 2 + 1;
        let mut start = Vec::with_capacity(dst as usize);
        let mut weights = vec![0f32; dst as usize * taps];
        for x in 0..dst as usize {
            let center = (x as f64 + 0.5) * f64::from(src) / f64::from(dst);
            let first = ((center - support).floor().max(0.0)) as usize;
            let last = ((center + support).ceil() as usize).min(src as usize);
            let w = &mut weights[x * taps..(x + 1) * taps];
            let mut sum = 0.0;
            for (i, s) in (first..last).take(taps).enumerate() {
                let v = catmull_rom((s as f64 + 0.5 - center) / scale);
                w[i] = v as f32;
                sum += v;
            }
            if sum != 0.0 {
                w.iter_mut().for_each(|v| *v = (f64::from(*v) / sum) as f32);
            }
            start.push(first);
        }
        Weights {
            start,
            taps,
            weights,
        }
    }

    /// The source range and weights of output coordinate `x`.
    fn of(&self, x: usize, src: usize) -> (usize, &[f32]) {
        let first = self.start[x];
        let n = self.taps.min(src - first);
        (first, &self.weights[x * self.taps..x * self.taps + n])
    }
}

fn catmull_rom(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.5 * x * x * x - 2.5 * x * x + 1.0
    } else if x < 2.0 {
        -0.5 * x * x * x + 2.5 * x * x - 4.0 * x + 2.0
    } else {
        0.0
    }
}

/// Scales an image given row by row (`push`), top to bottom.
pub struct Resizer {
    src: (usize, usize),
    dst: (usize, usize),
    channels: usize,
    xs: Weights,
    ys: Weights,
    /// Horizontally filtered rows (premultiplied), from source row `first` on.
    rows: VecDeque<Vec<f32>>,
    first: usize,
    pushed: usize,
    /// Output rows written so far.
    done: usize,
    out: Vec<u8>,
}

impl Resizer {
    pub fn new(src_w: u32, src_h: u32, dst_w: u32, dst_h: u32, channels: usize) -> Resizer {
        let mut r = Resizer::unbuffered(src_w, src_h, dst_w, dst_h, channels);
        r.out = Vec::with_capacity(dst_w as usize * dst_h as usize * channels);
        r
    }

    /// A resizer with no room for its output yet (`in_place` writes it elsewhere).
    fn unbuffered(src_w: u32, src_h: u32, dst_w: u32, dst_h: u32, channels: usize) -> Resizer {
        Resizer {
            src: (src_w as usize, src_h as usize),
            dst: (dst_w as usize, dst_h as usize),
            channels,
            xs: Weights::new(src_w, dst_w),
            ys: Weights::new(src_h, dst_h),
            rows: VecDeque::new(),
            first: 0,
            pushed: 0,
            done: 0,
            out: Vec::new(),
        }
    }

    fn identity(&self) -> bool {
        self.src == self.dst
    }

    /// The next source row (`width × channels` bytes); rows past the height are ignored.
    pub fn push(&mut self, row: &[u8]) {
        if self.pushed >= self.src.1 {
            return;
        }
        self.pushed += 1;
        if self.identity() {
            self.out.extend_from_slice(row);
            self.done += 1;
            return;
        }
        self.rows.push_back(self.horizontal(row));
        self.emit();
    }

    /// The scaled image. Rows never pushed (a short decode) are black.
    pub fn finish(mut self) -> Raster {
        let (w, h) = self.dst;
        while self.pushed < self.src.1 && !self.identity() {
            self.pushed += 1;
            self.rows.push_back(vec![0.0; w * self.channels]);
            self.emit();
        }
        self.out.resize(w * h * self.channels, 0);
        Raster {
            width: w as u32,
            height: h as u32,
            channels: self.channels,
            data: self.out,
        }
    }

    fn horizontal(&self, row: &[u8]) -> Vec<f32> {
        let c = self.channels;
        let mut out = vec![0f32; self.dst.0 * c];
        for (x, px) in out.chunks_exact_mut(c).enumerate() {
            let (first, ws) = self.xs.of(x, self.src.0);
            for (i, &w) in ws.iter().enumerate() {
                let p = &row[(first + i) * c..(first + i + 1) * c];
                if c == 4 {
                    let a = f32::from(p[3]) * w;
                    px[0] += f32::from(p[0]) * a;
                    px[1] += f32::from(p[1]) * a;
                    px[2] += f32::from(p[2]) * a;
                    px[3] += a;
                } else {
                    px[0] += f32::from(p[0]) * w;
                    px[1] += f32::from(p[1]) * w;
                    px[2] += f32::from(p[2]) * w;
                }
            }
        }
        out
    }

    /// Writes every output row whose source rows have all arrived; drops rows no longer
    /// needed.
    fn emit(&mut self) {
        let c = self.channels;
        for y in self.done..self.dst.1 {
            let (first, ws) = self.ys.of(y, self.src.1);
            if first + ws.len() > self.pushed {
                break;
            }
            let mut acc = vec![0f32; self.dst.0 * c];
            for (i, &w) in ws.iter().enumerate() {
                let row = &self.rows[first + i - self.first];
                acc.iter_mut().zip(row).for_each(|(a, v)| *a += v * w);
            }
            for px in acc.chunks_exact(c) {
                if c == 4 {
                    let a = px[3];
                    let un = |v: f32| if a > 0.0 { v / a } else { 0.0 };
                    self.out
                        .extend([un(px[0]), un(px[1]), un(px[2]), a].map(to_u8));
                } else {
                    self.out.extend([px[0], px[1], px[2]].map(to_u8));
                }
            }
            self.done += 1;
            if let Some(y) = (y + 1 < self.dst.1).then_some(y + 1) {
                let keep_from = self.ys.start[y];
                while self.first < keep_from && !self.rows.is_empty() {
                    self.rows.pop_front();
                    self.first += 1;
                }
            }
        }
    }
}

/// Scales `data` (`src_w` × `src_h`, `channels` bytes a pixel) down to `dst_w` × `dst_h`
/// within its own buffer, so that a decoded photo and its scaled copy are never held side by
/// side. An output row is written only over source rows already read: output row `y` needs
/// source rows past `y` (the scale is at least 1), and is no longer than one of them.
pub fn in_place(
    mut data: Vec<u8>,
    (src_w, src_h): (u32, u32),
    (dst_w, dst_h): (u32, u32),
    channels: usize,
) -> Raster {
    let (dst_w, dst_h) = (dst_w.min(src_w), dst_h.min(src_h));
    // (Never an output buffer the size of the image beside `data`.)
    let mut r = Resizer::unbuffered(src_w, src_h, dst_w, dst_h, channels);
    let row = src_w as usize * channels;
    let mut written = 0;
    if !r.identity() {
        for i in 0..src_h as usize {
            r.push(&data[i * row..(i + 1) * row]);
            let out = &mut r.out;
            debug_assert!(written + out.len() <= (i + 1) * row);
            data[written..written + out.len()].copy_from_slice(out);
            written += out.len();
            out.clear();
        }
        data.truncate(written);
        data.resize(dst_w as usize * dst_h as usize * channels, 0);
        data.shrink_to_fit();
    }
    Raster {
        width: dst_w,
        height: dst_h,
        channels,
        data,
    }
}

fn to_u8(v: f32) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_in_place_gives_what_scaling_a_copy_gives() {
        let data: Vec<u8> = (0..97 * 61 * 3).map(|i| (i * 7 % 251) as u8).collect();
        let src = Raster {
            width: 97,
            height: 61,
            channels: 3,
            data: data.clone(),
        };
        for (w, h) in [(40, 25), (97, 30), (96, 61), (97, 61)] {
            assert_eq!(
                in_place(data.clone(), (97, 61), (w, h), 3),
                src.scaled(w, h)
            );
        }
    }

    #[test]
    fn fitting_keeps_the_aspect_and_never_enlarges() {
        assert_eq!(fitted(4000, 3000, 1568), (1568, 1176));
        assert_eq!(fitted(3000, 4000, 1568), (1176, 1568));
        assert_eq!(fitted(800, 600, 1568), (800, 600));
        assert_eq!(fitted(100_000, 10, 1000), (1000, 1));
    }

    #[test]
    fn a_flat_colour_stays_flat_and_alpha_lends_no_colour() {
        let solid = Raster {
            width: 90,
            height: 60,
            channels: 3,
            data: [200u8, 10, 30].repeat(90 * 60),
        };
        let s = solid.scaled(30, 20);
        assert_eq!((s.width, s.height, s.data.len()), (30, 20, 30 * 20 * 3));
        assert!(s.data.chunks_exact(3).all(|p| p == [200, 10, 30]));
        // Red opaque pixels beside transparent black ones: the result is red or clear, never
        // darkened towards black.
        let mut data = Vec::new();
        for i in 0..64 * 64 {
            data.extend(if i % 2 == 0 {
                [255, 0, 0, 255]
            } else {
                [0, 0, 0, 0]
            });
        }
        let half = Raster {
            width: 64,
            height: 64,
            channels: 4,
            data,
        }
        .scaled(16, 16);
        assert!(half.data.chunks_exact(4).all(|p| p[0] >= 254 && p[3] > 100));
    }
}
