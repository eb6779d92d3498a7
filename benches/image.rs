//! Fitting a shared photo to each provider: `cargo bench --bench image`.
//!
//! A photo-like 12-megapixel image (4,032 × 3,024, a phone camera's: gradients, shapes and
//! sensor noise) encoded as a JPEG of about 5 MB, then `prepare`d for each provider's limits:
//! decoded (scaled down in its DCT where it can be), scaled to the long edge, re-encoded
//! within the bytes. For each: the median and slowest time of several runs, and the peak heap
//! over what was held before the call (the file itself is held by the caller and not counted),
//! from an allocator that counts, and the CPU time a run takes (steadier than wall time on a
//! shared machine). Also a 2,880 × 1,800 PNG screenshot. Targets: ≤ 200 ms, and a peak ≤ 3×
//! the file.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anima::llm::image::{prepare, ImageLimits};

/// The system allocator, counting the bytes held now and the most held since the last reset.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size > layout.size() {
                let now = NOW.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                NOW.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const RUNS: usize = 7;

/// A photo-like RGB image: a sky-to-ground gradient, a few soft discs, and noise.
fn photo(w: u32, h: u32, noise: u32) -> Vec<u8> {
    let mut seed = 0x9e37_79b9_u32;
    let discs = [(0.3, 0.4, 0.15), (0.7, 0.6, 0.2), (0.5, 0.8, 0.1)];
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let mut rgb = [
                90.0 + 120.0 * (1.0 - fy),
                120.0 + 60.0 * fx,
                200.0 - 150.0 * fy,
            ];
            for (i, (cx, cy, r)) in discs.iter().enumerate() {
                let d = ((fx - cx).powi(2) + (fy - cy).powi(2)).sqrt();
                if d < *r {
                    rgb[i] = rgb[i] * 0.4 + 150.0 * (1.0 - d / r);
                }
            }
            for c in &mut rgb {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                *c += (seed % (2 * noise + 1)) as f32 - noise as f32;
                data.push(c.clamp(0.0, 255.0) as u8);
            }
        }
    }
    data
}

fn jpeg(w: u32, h: u32, data: &[u8], q: u8) -> Vec<u8> {
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, q)
        .encode(data, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

fn png(w: u32, h: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    let mut wr = e.write_header().unwrap();
    wr.write_image_data(data).unwrap();
    wr.finish().unwrap();
    out
}

/// A screenshot-like image: flat panels, lines of "text" (dark dashes), a photo inset.
fn screenshot(w: u32, h: u32) -> Vec<u8> {
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let px = if x < 300 {
                [40, 44, 52]
            } else if y % 24 < 14 && (x / 9) % 11 != 0 && (y / 24 + x / 400) % 3 != 2 {
                [30, 30, 30]
            } else {
                [250, 250, 250]
            };
            data.extend(px);
        }
    }
    data
}

/// CPU time this process has used (user + system), from /proc: steadier than wall time on a
/// shared machine. Ticks of 10 ms.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    Duration::from_millis(f.iter().sum::<u64>() * 10)
}

fn mb(n: usize) -> f64 {
    n as f64 / 1e6
}

fn run(name: &str, file: &[u8], limits: &ImageLimits) {
    let mut times = Vec::new();
    let mut peak = 0;
    let mut out = None;
    let cpu_start = cpu();
    for _ in 0..RUNS {
        let held = NOW.load(Ordering::Relaxed);
        PEAK.store(held, Ordering::Relaxed);
        let t = Instant::now();
        let img = prepare(file, limits).unwrap();
        times.push(t.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - held);
        out = Some(img);
    }
    let cpu_each = (cpu() - cpu_start) / RUNS as u32;
    times.sort();
    let img = out.unwrap();
    let median: Duration = times[RUNS / 2];
    println!(
        "| {name} | {} × {} {} ({:.2} MB) | {} ms | {} ms | {} ms | {:.1} MB ({:.1}× the file) |",
        img.width,
        img.height,
        img.media_type,
        mb(img.data.len()),
        median.as_millis(),
        times[RUNS - 1].as_millis(),
        cpu_each.as_millis(),
        mb(peak),
        peak as f64 / file.len() as f64,
    );
}

fn main() {
    let (w, h) = (4032, 3024);
    let pixels = photo(w, h, 24);
    // The quality that comes closest to 5 MB without going over.
    let file = (80..=100)
        .rev()
        .map(|q| (q, jpeg(w, h, &pixels, q)))
        .find(|(_, f)| f.len() <= 5_000_000)
        .unwrap();
    drop(pixels);
    println!(
        "photo: {w} × {h} JPEG at quality {}, {:.2} MB",
        file.0,
        mb(file.1.len())
    );
    let shot = png(2880, 1800, &screenshot(2880, 1800));
    println!("screenshot: 2880 × 1800 PNG, {:.2} MB", mb(shot.len()));
    println!();
    println!("| fitted for | result | median | slowest | CPU a run | peak heap over idle |");
    println!("|---|---|---|---|---|---|");
    let providers = [
        ("Anthropic", anima::llm::anthropic::IMAGE_LIMITS),
        ("OpenAI", anima::llm::openai::OPENAI_IMAGE_LIMITS),
        (
            "other OpenAI-compatible",
            anima::llm::openai::LOCAL_IMAGE_LIMITS,
        ),
    ];
    for (name, limits) in &providers {
        run(&format!("photo, {name}"), &file.1, limits);
    }
    for (name, limits) in &providers {
        run(&format!("screenshot, {name}"), &shot, limits);
    }
}
