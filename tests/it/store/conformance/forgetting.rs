//! Forgetting, then a turn: what each backend forgets of a person and of a quiet conversation,
//! and the window the next turn reads from what is left (PostgreSQL counts what was said again;
//! SQLite counts it at each read).

use anima::memory::faces::Store;
use anima::memory::now_ms;

use super::{accept, reply, start, Seen};

/// A turn of `user` in `thread` with a window of 4, committed with a reply.
async fn turn(s: &dyn Store, thread: &str, user: &str, name: &str, n: usize) {
    let mut t = start(
        thread,
        user,
        name,
        &format!("{name} says {n}"),
        &format!("{user}{n}"),
    );
    t.window = 4;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    let mut rec = reply(thread, user, &ctx, &format!("to {name}, {n}"));
    rec.user_model = (n == 0).then(|| (format!("# {name}"), "Met.".to_string()));
    s.commit_turn(rec).await.unwrap();
}

pub(super) async fn a_person_then_a_quiet_spell(s: &dyn Store, seen: &mut Seen) {
    for n in 0..4 {
        turn(s, "C1:1.0", "U1", "Ada", n).await;
        turn(s, "C1:1.0", "U2", "Grace", n).await;
    }
    turn(s, "C2:1.0", "U2", "Grace", 9).await;
    let row = accept(s, "C2:1.0", 1.0, "U2", "answered").await;
    let claimed = s.claim_next("C2:1.0").await.unwrap().expect("the row");
    let mut t = start("C2:1.0", "U2", "Grace", "answered", "r");
    t.source = Some(claimed.source());
    t.inbox = Some(row);
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    let mut rec = reply("C2:1.0", "U2", &ctx, "yes");
    rec.inbox = Some((row, "yes".into()));
    s.commit_turn(rec).await.unwrap();
    s.mark_done(row).await.unwrap();
    accept(s, "C3:1.0", 2.0, "U2", "waiting").await;

    seen.note("nobody", s.forget_person("U404").await.unwrap());
    seen.note("Grace", s.forget_person("U2").await.unwrap());
    seen.renumber();
    seen.inbox("her answered row", s, row).await;
    let mut t = start("C1:1.0", "U1", "Ada", "still here", "a");
    t.window = 4;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("Ada's next turn", &ctx);
    s.commit_turn(reply("C1:1.0", "U1", &ctx, "yes"))
        .await
        .unwrap();
    seen.store("after Grace", s, &["C1:1.0", "C2:1.0"], &["U1", "U2"])
        .await;

    seen.note("quiet", s.forget_quiet(now_ms() + 60_000).await.unwrap());
    seen.renumber();
    let mut t = start("C1:1.0", "U1", "Ada", "hello again", "b");
    t.window = 4;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("after the quiet spell", &ctx);
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}
