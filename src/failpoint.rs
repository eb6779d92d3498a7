//! Fault injection for tests: named points that panic on purpose, so a test can prove that a
//! panic cannot wedge a conversation. Only in debug builds, and only when the environment
//! variable `ANIMA_FAILPOINTS` names the point (comma-separated names); a release build has
//! none.

/// Panics when `when` holds and the point `name` is armed.
#[cfg(debug_assertions)]
pub fn panic_if(name: &str, when: bool) {
    use std::sync::OnceLock;
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| {
        std::env::var("ANIMA_FAILPOINTS")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    if when && armed.iter().any(|a| a == name) {
        panic!("failpoint {name} hit");
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn panic_if(_name: &str, _when: bool) {}
