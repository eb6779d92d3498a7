//! The inspector over plain HTTP: the login link and its cookie, the refusals (401; 404 on a
//! daemon without the token), the JSON API, the safe headers, the chat's CSRF refusals, the
//! bounds on long texts and long lists, the process, soul and people pages, and the stream.

use super::*;

#[test]
fn the_login_link_sets_a_strict_cookie_and_the_api_takes_it_or_a_bearer_else_401() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let now = anima::memory::now_ms();
    record(
        &home,
        trace(1, "C1:1.0", "Ada", "first", "one", now - 3_000),
    );
    record(
        &home,
        trace(2, "D2", "<script>", "elsewhere", "<b>two</b>", now - 2_000),
    );
    record(
        &home,
        trace(3, "C1:1.0", "Ada", "second", "three", now - 1_000),
    );
    let s = Served::start(&home);
    let url = |p: &str| format!("{}{p}", s.base);
    // Nothing without the token: every route the inspector declares, through its one gate.
    assert_eq!(
        request("POST", &url("/inspect/chat"), &[], "message=hi").status,
        401
    );
    for path in every_path() {
        let path = path.as_str();
        assert_eq!(get(&url(path), &[]).status, 401, "{path}");
        assert_eq!(
            get(&url(path), &[("authorization", "Bearer nope")]).status,
            401,
            "{path}"
        );
        assert_eq!(
            get(&url(path), &[("cookie", "anima_inspect=nope")]).status,
            401,
            "{path}"
        );
    }
    assert_eq!(get(&url("/inspect/?token=nope"), &[]).status, 401);
    // The login link: a cookie the page's script cannot read, sent only by the site itself.
    let login = get(&s.login, &[]);
    assert_eq!(login.status, 303);
    assert_eq!(login.header("location"), Some("/inspect/"));
    let cookie = login.header("set-cookie").unwrap().to_string();
    for part in ["anima_inspect=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_string();
    let page = get(&url("/inspect/"), &[("cookie", &session)]);
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.header("content-security-policy"), Some(CSP));
    assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe-inline"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert!(
        page.body.contains("&lt;script&gt;") && !page.body.contains("<script>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("&lt;b&gt;two&lt;/b&gt;") && !page.body.contains("<b>two"));
    // The API, with the cookie or a bearer.
    let auth = bearer(&s.token);
    let list = get(
        &url("/api/inspect/turns?thread=C1%3A1.0"),
        &[("authorization", &auth)],
    )
    .json();
    let turns = list["turns"].as_array().unwrap();
    assert_eq!(
        turns
            .iter()
            .map(|t| t["trace"].as_str().unwrap())
            .collect::<Vec<_>>(),
        [id(3), id(1)]
    );
    for key in ["trace", "thread", "person", "process", "at", "reply"] {
        assert!(turns[0].get(key).is_some(), "{key} in {}", turns[0]);
    }
    assert_eq!(turns[0]["reply"], "three");
    let page1 = get(&url("/api/inspect/turns?limit=1"), &[("cookie", &session)]).json();
    assert_eq!(page1["turns"][0]["trace"], id(3));
    let before = page1["before"]
        .as_i64()
        .expect("a cursor for the next page");
    let page2 = get(
        &url(&format!("/api/inspect/turns?limit=1&before={before}")),
        &[("cookie", &session)],
    )
    .json();
    assert_eq!(page2["turns"][0]["trace"], id(2));
    let one = get(
        &url(&format!("/api/inspect/turns/{}", id(2))),
        &[("authorization", &auth)],
    );
    assert_eq!(one.header("content-type"), Some("application/json"));
    let one = one.json();
    assert_eq!(one["trace"], id(2));
    assert_eq!(one["thread"], "D2");
    assert_eq!(one["process"], "main");
    let names: Vec<_> = one["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, SECTIONS);
    assert_eq!(one["sections"][0]["cached"], true);
    assert_eq!(
        one["sections"][3]["chars"],
        "<message>\nelsewhere\n</message>\n".len()
    );
    assert!(one["prompt"]
        .as_str()
        .unwrap()
        .contains("<message>\nelsewhere"));
    assert!(one["raw"]
        .as_str()
        .unwrap()
        .starts_with("<internal_monologue"));
    assert_eq!(one["cognition"][0]["step"], "internal_monologue");
    assert_eq!(one["cognition"][0]["text"], "thinking of elsewhere");
    assert_eq!(one["decisions"][0]["kind"], "process");
    assert_eq!(one["reply"], "<b>two</b>");
    assert_eq!(
        get(&url("/api/inspect/turns/ffff"), &[("authorization", &auth)]).status,
        404
    );
    assert_eq!(
        get(
            &url("/api/inspect/turns?limit=abc"),
            &[("authorization", &auth)]
        )
        .status,
        400
    );
    let js = get(
        &url("/inspect/static/inspector.js"),
        &[("cookie", &session)],
    );
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    assert!(js.body.contains("EventSource"));
}

#[test]
fn the_chat_post_needs_the_session_and_its_csrf_token_and_no_get_changes_anything() {
    let model = FakeModel::start();
    model.respond_with(|turn| answer(&format!("heard: {}", current_message(turn))));
    let home = Home::new("anthropic", &model.url(), "");
    let s = Served::start(&home);
    let url = |p: &str| format!("{}{p}", s.base);
    let session = format!("anima_inspect={}", s.token);
    let page = get(
        &url("/inspect/chat?message=hello&thread=x"),
        &[("cookie", &session)],
    );
    assert_eq!(page.status, 200);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(csrf.len(), 64);
    assert_ne!(csrf, s.token, "the CSRF token is not the session's");
    let form = |csrf: &str| format!("message=hello&thread=web&name=Ada&csrf={csrf}");
    let post = |headers: &[(&str, &str)], body: &str| {
        let mut h = vec![("content-type", "application/x-www-form-urlencoded")];
        h.extend_from_slice(headers);
        request("POST", &url("/inspect/chat"), &h, body)
    };
    assert_eq!(post(&[], &form(&csrf)).status, 401, "no session");
    assert_eq!(
        post(&[("cookie", &session)], "message=hello").status,
        403,
        "no CSRF token"
    );
    assert_eq!(
        post(&[("cookie", &session)], &form(&"0".repeat(64))).status,
        403,
        "a wrong one"
    );
    assert_eq!(
        post(&[("cookie", &session)], &form(&s.token)).status,
        403,
        "the session's token is not the CSRF token"
    );
    assert!(
        model.requests().is_empty(),
        "nothing refused, and no GET, reached the model"
    );
    let said = post(
        &[("cookie", &session), ("accept", "application/json")],
        &form(&csrf),
    );
    assert_eq!(said.status, 200, "{}", said.body);
    let said = said.json();
    assert_eq!(said["reply"], "heard: hello");
    assert_eq!(said["monologue"], "Thinking about: heard: hello");
    assert_eq!(model.requests().len(), 1);
    // The same turn's memory as `anima chat`'s: the message is in the conversation.
    let entries = wait(home.store().thread_entries("web")).unwrap();
    assert!(
        entries.iter().any(|e| e.content.contains("hello")),
        "{entries:?}"
    );
    // Without JavaScript, the form's answer is a page, its texts escaped.
    let body = "message=%3Cimg+src%3Dx+onerror%3Dalert(1)%3E&thread=web&csrf=".to_string() + &csrf;
    let page = post(&[("cookie", &session)], &body);
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("heard: &lt;img src=x onerror=alert(1)&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<img"));
}

#[test]
fn long_texts_are_cut_with_a_link_and_lists_stay_bounded() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let now = anima::memory::now_ms();
    let megabyte = "é<i>".repeat(1 << 18);
    let mut huge = trace(1, "big", "<script>alert(1)</script>", &megabyte, "ok", now);
    let mut body = TraceBody::from_json(&huge.body).unwrap();
    body.cognition[0].text = "m".repeat(100_000);
    body.calls[0].raw = "<<a<b>></c><internal_monologue><</internal_>".repeat(5_000);
    body.decisions[0].text = "<a<b>tool ✨".repeat(100_000);
    huge.body = body.to_json();
    // A name past what a page shows.
    let name = "<script>".repeat(300);
    huge.person = Some(name.clone());
    record(&home, huge);
    let monologue = "<i>é</i>".repeat(15_000);
    wait(home.store().add_journal(&monologue)).unwrap();
    let store = home.store();
    wait(async {
        for n in 0..10_000u64 {
            store
                .record_trace(trace(
                    10 + n,
                    &format!("T{n}"),
                    "p",
                    "m",
                    "r",
                    now - 10_000 - n as i64,
                ))
                .await
                .unwrap();
        }
    });
    let s = Served::start(&home);
    let auth = bearer(&s.token);
    let h = [("authorization", auth.as_str())];
    let url = |p: &str| format!("{}{p}", s.base);
    let started = Instant::now();
    let page = get(&url(&format!("/inspect/turn/{}", id(1))), &h);
    assert_eq!(page.status, 200);
    assert!(
        page.body.len() < 400_000,
        "a 1 MB message and a 100 KB monologue, cut: {} bytes",
        page.body.len()
    );
    assert!(
        !page.body.contains("<i>")
            && !page.body.contains("<a<")
            && !page.body.contains("<script>alert")
    );
    for part in [
        "stimulus",
        "cognition-0",
        "prompt-0",
        "raw-0",
        "decision-0",
        "person",
    ] {
        assert!(
            page.body
                .contains(&format!("/inspect/turn/{}/text/{part}", id(1))),
            "{part}"
        );
    }
    let whole = get(&url(&format!("/inspect/turn/{}/text/stimulus", id(1))), &h);
    assert_eq!(
        whole.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(whole.body, megabyte);
    let decision = get(
        &url(&format!("/inspect/turn/{}/text/decision-0", id(1))),
        &h,
    );
    assert_eq!(decision.body, "<a<b>tool ✨".repeat(100_000));
    let person = get(&url(&format!("/inspect/turn/{}/text/person", id(1))), &h);
    assert_eq!(person.body, name);
    assert_eq!(
        get(&url(&format!("/inspect/turn/{}/text/raw-9", id(1))), &h).status,
        404
    );
    let home_page = get(&url("/inspect/"), &h);
    assert_eq!(home_page.status, 200);
    assert_eq!(home_page.body.matches("<li class=\"turn\"").count(), 50);
    let links = |body: &str| -> Vec<String> {
        body.split("<li><a href=\"/inspect/thread?thread=")
            .skip(1)
            .map(|l| l.split('"').next().unwrap().to_string())
            .collect()
    };
    let first = links(&home_page.body);
    assert_eq!(first.len(), 100, "a page of conversations");
    assert_eq!(first[1..3], ["T0", "T1"], "the most recently traced first");
    // The rest of the 10,000 page on behind a link, none listed twice.
    let more = home_page
        .body
        .split("<a class=\"older\" href=\"")
        .nth(1)
        .and_then(|l| l.split('"').next())
        .expect("a link to the conversations before these")
        .replace("&amp;", "&");
    assert!(more.starts_with("?after_at="), "{more}");
    let second = links(&get(&url(&format!("/inspect/{more}")), &h).body);
    assert_eq!(second.len(), 100);
    assert_eq!(second[0], "T99", "the next after the first page's last");
    assert!(home_page.body.contains("Older turns"));
    assert!(
        home_page.body.len() < 200_000,
        "a long name cut in the timeline"
    );
    // A long journal entry: cut, escaped, whole behind its link.
    let soul = get(&url("/inspect/soul"), &h);
    assert!(
        soul.body.contains("/inspect/soul/text/journal-0"),
        "cut with a link"
    );
    assert!(!soul.body.contains("<i>") && soul.body.len() < 200_000);
    let entry = get(&url("/inspect/soul/text/journal-0"), &h);
    assert_eq!(
        entry.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(entry.body, monologue);
    assert_eq!(get(&url("/inspect/soul/text/journal-99"), &h).status, 404);
    let all = get(&url("/api/inspect/turns?limit=100000"), &h).json();
    assert_eq!(
        all["turns"].as_array().unwrap().len(),
        100,
        "the limit is capped"
    );
    let thread = get(&url("/inspect/thread?thread=T5"), &h);
    assert_eq!(thread.body.matches("<li class=\"turn\"").count(), 1);
    // The pages that read many traces at once stay bounded and quick with 10,000 kept.
    for page in [
        "/inspect/process",
        "/inspect/inner",
        "/inspect/people",
        "/inspect/soul",
    ] {
        let asked = Instant::now();
        let answer = get(&url(page), &h);
        assert_eq!(answer.status, 200, "{page}");
        assert!(
            answer.body.len() < 200_000,
            "{page}: {} bytes",
            answer.body.len()
        );
        eprintln!("{page}: {:?}", asked.elapsed());
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_daemon_serves_the_inspector_only_with_its_token() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = daemon_home(&model, &slack, "socket", "");
    let d = Daemon::start_env(&home, &[("ANIMA_INSPECT_TOKEN", "sesame-0123456789")]);
    let login = get(&d.url("/inspect/?token=sesame-0123456789"), &[]);
    assert_eq!(login.status, 303);
    assert!(login.header("set-cookie").unwrap().contains("HttpOnly"));
    let h = [("authorization", "Bearer sesame-0123456789")];
    let turns = get(&d.url("/api/inspect/turns"), &h);
    assert_eq!(turns.status, 200, "{}", turns.body);
    assert!(turns.json()["turns"].is_array());
    assert_eq!(get(&d.url("/api/inspect/turns"), &[]).status, 401);
    assert_eq!(
        get(&d.url("/inspect/"), &[("authorization", "Bearer sesame")]).status,
        401
    );
    drop(d);
    let d = Daemon::start(&home);
    let login = "/inspect/?token=sesame-0123456789".to_string();
    for path in every_path().iter().chain([&login]) {
        assert_eq!(get(&d.url(path), &h).status, 404, "{path}");
    }
    assert_ne!(
        get(&d.url("/healthz"), &[]).status,
        404,
        "the daemon's own routes stay"
    );
}

/// Reads server-sent events from `url` until the stream ends or `enough` of them came:
/// their `data:` lines, and whether the server ended the stream.
fn read_events(
    url: &str,
    token: &str,
    enough: usize,
    after_connect: impl FnOnce() + Send,
) -> (Vec<String>, bool) {
    let req = reqwest::Client::new()
        .get(url)
        .header("authorization", bearer(token));
    wait(async move {
        use futures_util::StreamExt;
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        after_connect();
        let mut body = resp.bytes_stream();
        let (mut text, mut data) = (String::new(), Vec::new());
        let ended = loop {
            match tokio::time::timeout(Duration::from_secs(10), body.next()).await {
                Ok(Some(Ok(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(_) => break true,
                Err(_) => break false,
            }
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                data.extend(
                    event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data: "))
                        .map(str::to_string),
                );
            }
            if data.len() >= enough {
                break false;
            }
        };
        (data, ended)
    })
}

#[test]
fn the_stream_sends_each_record_as_an_event_and_drops_a_client_that_falls_behind() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let s = in_process(&model, &home);
    let url = format!("{}/api/inspect/stream", s.base);
    let hub = s.engine.hub().clone();
    let (events, _) = read_events(&url, &s.token, 2, || {
        while !hub.watched() {
            std::thread::sleep(Duration::from_millis(5));
        }
        hub.emit(|| response(7, "C1:1.0"));
        hub.emit(|| Record {
            phase: Phase::Error,
            text: "<script>".into(),
            ..response(8, "")
        });
    });
    let first: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(first["phase"], "response");
    assert_eq!(first["trace"], id(7));
    assert_eq!(first["thread"], "C1:1.0");
    assert!(first["at"].as_i64().unwrap() > 0);
    let second: Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(
        (second["phase"].as_str(), second["text"].as_str()),
        (Some("error"), Some("<script>"))
    );
    // A client that does not read while far more than the hub keeps goes by is dropped:
    // its stream ends, short of what was sent, and nothing waits for it. (A server of its
    // own: the first client's subscription lasts until its connection is written to.)
    let s = in_process(&model, &home);
    let url = format!("{}/api/inspect/stream", s.base);
    let sent = 20_000;
    let hub = s.engine.hub().clone();
    let (events, ended) = {
        let url = url.clone();
        let token = s.token.clone();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            read_events(&url, &token, usize::MAX, move || {
                // Stalled until every record is sent.
                rx.recv().unwrap();
            })
        });
        while !hub.watched() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let started = Instant::now();
        for n in 0..sent {
            hub.emit(|| Record {
                text: "x".repeat(2_000),
                ..response(n, "busy")
            });
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a stalled client held the sender back"
        );
        tx.send(()).unwrap();
        reader.join().unwrap()
    };
    assert!(ended, "the lagging client's stream was ended");
    assert!(
        events.len() < sent as usize,
        "it got {} of {sent}",
        events.len()
    );
}

#[test]
fn the_process_graph_the_soul_and_people_are_drawn_and_escaped() {
    let model = FakeModel::start();
    model.respond_with(|turn| answer(&format!("heard: {}", current_message(turn))));
    let home = Home::new("anthropic", &model.url(), "");
    let s = Served::start(&home);
    let url = |p: &str| format!("{}{p}", s.base);
    let session = format!("anima_inspect={}", s.token);
    let page = get(&url("/inspect/chat"), &[("cookie", &session)]);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let said = request(
        "POST",
        &url("/inspect/chat"),
        &[
            ("cookie", &session),
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "application/json"),
        ],
        &format!("message=hi&thread=web&name=%3Cscript%3E&csrf={csrf}"),
    );
    assert_eq!(said.status, 200, "{}", said.body);
    let now = anima::memory::now_ms();
    record(&home, trace(1, "web", "<script>", "hi", "heard: hi", now));
    let h = [("cookie", session.as_str())];
    let graph = get(&url("/inspect/process"), &h);
    assert_eq!(graph.status, 200);
    assert!(
        graph.body.contains("<svg id=\"process-graph\""),
        "{}",
        graph.body
    );
    assert!(
        graph
            .body
            .contains("data-process=\"main\" data-standing=\"1\""),
        "{}",
        graph.body
    );
    let soul = get(&url("/inspect/soul"), &h);
    assert_eq!(soul.status, 200);
    assert!(soul.body.contains("Cognitive states") && soul.body.contains("Soul state"));
    let people = get(&url("/inspect/people"), &h);
    assert_eq!(people.status, 200);
    assert!(
        people.body.contains("&lt;script&gt;") && !people.body.contains("<script>"),
        "{}",
        people.body
    );
    let user_id = people
        .body
        .split("/inspect/person?id=")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let person = get(&url(&format!("/inspect/person?id={user_id}")), &h);
    assert_eq!(person.status, 200, "{}", person.body);
    assert!(person.body.contains("&lt;script&gt;") && !person.body.contains("<script>"));
    assert_eq!(get(&url("/inspect/person?id=nobody"), &h).status, 404);
    assert_eq!(get(&url("/inspect/process"), &[]).status, 401);
}
