//! An error from the MCP SDK or the HTTP client, said in words: the innermost cause, which is
//! what went wrong (the layers around it name Rust types, such as `Transport [rmcp::…] error`).

/// The innermost cause of `e`, as its own message.
pub fn words(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_cause_is_said() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the pipe broke");
        let e = rmcp::transport::DynamicTransportError::from_parts(
            "rmcp::transport::worker::WorkerTransport<Some(x)>",
            std::any::TypeId::of::<u8>(),
            Box::new(io),
        );
        let e = rmcp::ServiceError::TransportSend(e);
        assert_eq!(words(&e), "the pipe broke");
    }
}
