//! An incremental server-sent-events reader: bytes in any chunking → (event, data) frames.

use futures_util::StreamExt;

use super::LlmError;

/// Feeds every frame of a response body to `on_frame` until it returns `Some`. `Ok(None)`:
/// the body ended first (the caller decides whether that is complete).
pub async fn read<T>(
    provider: &'static str,
    resp: reqwest::Response,
    mut on_frame: impl FnMut(&Frame) -> Result<Option<T>, LlmError>,
) -> Result<Option<T>, LlmError> {
    let mut reader = SseReader::default();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| LlmError::Stream {
            provider,
            message: e.to_string(),
            retryable: true,
        })?;
        for frame in reader.push(&chunk) {
            if let Some(done) = on_frame(&frame)? {
                return Ok(Some(done));
            }
        }
    }
    match reader.finish() {
        Some(frame) => on_frame(&frame),
        None => Ok(None),
    }
}

/// One SSE frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseReader {
    buf: Vec<u8>,
}

impl SseReader {
    /// Feeds bytes; returns the frames completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        self.buf.extend_from_slice(bytes);
        let mut frames = Vec::new();
        while let Some((end, sep)) = find_blank_line(&self.buf) {
            let raw: Vec<u8> = self.buf.drain(..end + sep).collect();
            if let Some(f) = parse_frame(&String::from_utf8_lossy(&raw[..end])) {
                frames.push(f);
            }
        }
        frames
    }

    /// The frame left when the stream ends without a final blank line.
    pub fn finish(&mut self) -> Option<Frame> {
        let raw = std::mem::take(&mut self.buf);
        parse_frame(&String::from_utf8_lossy(&raw))
    }
}

fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    for i in 0..buf.len() {
        if buf[i..].starts_with(b"\n\n") {
            return Some((i, 2));
        }
        if buf[i..].starts_with(b"\r\n\r\n") {
            return Some((i, 4));
        }
    }
    None
}

fn parse_frame(text: &str) -> Option<Frame> {
    let mut event = None;
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = Some(value.to_string()),
            "data" => data.push(value),
            _ => {}
        }
    }
    if event.is_none() && data.is_empty() {
        return None;
    }
    Some(Frame {
        event,
        data: data.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_any_chunking() {
        let stream = "event: message_start\ndata: {\"a\":1}\n\n: comment\n\nevent: ping\ndata: {}\r\n\r\ndata: é\n\n";
        let bytes = stream.as_bytes();
        let whole = SseReader::default().push(bytes);
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[2].data, "é");
        for split in 1..bytes.len() {
            let mut r = SseReader::default();
            let mut frames = r.push(&bytes[..split]);
            frames.extend(r.push(&bytes[split..]));
            assert_eq!(frames, whole, "split at {split}");
        }
    }
}
