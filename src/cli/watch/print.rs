//! What `anima watch` prints for a record's JSON as a daemon sent it: the record itself with
//! `--json` (as sent, unless it must be written anew), else a line for the terminal (`line`),
//! and nothing for a record the filters leave out or that cannot be read. Pure but for the
//! warning about an unreadable record.

use super::{line, WatchArgs};
use crate::window::{Phase, Record};

/// What `--json` and the filters read of a record before they print it whole.
#[derive(serde::Deserialize)]
struct Head<'a> {
    phase: Phase,
    #[serde(borrow)]
    thread: std::borrow::Cow<'a, str>,
    /// A record that names a daemon already is given the name it is followed by instead.
    daemon: Option<serde::de::IgnoredAny>,
}

/// The line a record's JSON (`data`, as a daemon sent it) prints as, if the filters let it
/// through: the record itself with `--json`, else a line for the terminal. A record that
/// cannot be read is skipped, saying so.
pub(super) fn printed(
    data: &str,
    daemon: Option<&str>,
    args: &WatchArgs,
    phases: &[Phase],
    width: usize,
) -> Option<String> {
    let wanted = |phase: Phase, thread: &str| {
        (phases.is_empty() || phases.contains(&phase))
            && args.thread.as_ref().is_none_or(|t| t == thread)
    };
    if args.json {
        let Ok(head) = serde_json::from_str::<Head>(data) else {
            eprintln!("anima: a record that cannot be read was skipped");
            return None;
        };
        return wanted(head.phase, &head.thread).then(|| json_line(data, &head, daemon));
    }
    let Ok(record) = serde_json::from_str::<Record>(data) else {
        eprintln!("anima: a record that cannot be read was skipped");
        return None;
    };
    wanted(record.phase, &record.thread).then(|| line::human(&record, daemon, width))
}

/// A record's JSON (`data`, read as `head`) as one line; `daemon` names its daemon when
/// several are followed. The record is printed as the daemon wrote it, unless it spans lines
/// or must have its daemon's name put in its place: then it is written anew.
fn json_line(data: &str, head: &Head, daemon: Option<&str>) -> String {
    let one_line = !data.contains(['\n', '\r']);
    match daemon {
        None if one_line => data.to_string(),
        Some(d) if one_line && head.daemon.is_none() && data.starts_with('{') => {
            let name = serde_json::to_string(d).unwrap_or_default();
            format!("{{\"daemon\":{name},{}", &data[1..])
        }
        _ => {
            let mut value: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
            if let (Some(d), Some(map)) = (daemon, value.as_object_mut()) {
                map.insert("daemon".into(), d.into());
            }
            value.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--json`'s line for a record's JSON as a daemon sent it.
    fn json_of(data: &str, daemon: Option<&str>) -> String {
        let head: Head = serde_json::from_str(data).unwrap();
        json_line(data, &head, daemon)
    }

    #[test]
    fn a_json_line_is_the_record_and_names_its_daemon_among_several() {
        let record = Record {
            phase: Phase::Response,
            trace: "t".into(),
            thread: "D1".into(),
            at: 5,
            text: "\u{1b}[31mhi \u{2028} ünï 🌍".into(),
            data: serde_json::json!({"reply": "\"}{"}),
        };
        let sent = serde_json::to_string(&record).unwrap();
        let one = json_of(&sent, None);
        assert_eq!(serde_json::from_str::<Record>(&one).unwrap(), record);
        assert!(!one.contains('\u{1b}'), "JSON escapes it: {one}");
        let named: serde_json::Value =
            serde_json::from_str(&json_of(&sent, Some("h \"pid\" 1"))).unwrap();
        assert_eq!(named["daemon"], "h \"pid\" 1");
        assert_eq!(named["text"], record.text.as_str());
        assert_eq!(named["data"]["reply"], "\"}{");
    }

    #[test]
    fn a_record_over_lines_or_naming_a_daemon_itself_is_written_anew() {
        let spread = "{\"phase\": \"model\",\n \"trace\": \"t\", \"thread\": \"D1\",\r\n \"at\": 1, \"text\": \"x\"}";
        let one = json_of(spread, None);
        assert!(!one.contains(['\n', '\r']), "{one}");
        assert_eq!(serde_json::from_str::<Record>(&one).unwrap().text, "x");
        let claimed =
            r#"{"phase":"model","trace":"t","thread":"D1","at":1,"text":"x","daemon":"spoofed"}"#;
        let named: serde_json::Value =
            serde_json::from_str(&json_of(claimed, Some("real pid 2"))).unwrap();
        assert_eq!(named["daemon"], "real pid 2");
        assert_eq!(
            json_of(claimed, Some("real pid 2"))
                .matches("daemon")
                .count(),
            1
        );
    }

    #[test]
    fn the_filters_and_an_unreadable_record_print_nothing() {
        let args = |json| WatchArgs {
            thread: Some("D1".into()),
            phase: Vec::new(),
            json,
        };
        let data = |phase: &str, thread: &str| {
            format!(r#"{{"phase":"{phase}","trace":"t","thread":"{thread}","at":1,"text":"x"}}"#)
        };
        for json in [true, false] {
            let a = args(json);
            let only_model = [Phase::Model];
            assert!(printed(&data("model", "D1"), None, &a, &only_model, 80).is_some());
            assert!(printed(&data("error", "D1"), None, &a, &only_model, 80).is_none());
            assert!(printed(&data("model", "D2"), None, &a, &[], 80).is_none());
            assert!(printed("[\"model\", \"D1\"", None, &a, &[], 80).is_none());
            assert!(printed("{\"phase\":\"nonsense\"}", None, &a, &[], 80).is_none());
        }
    }
}
