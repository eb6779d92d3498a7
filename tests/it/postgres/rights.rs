//! A role that may not do what anima needs: `anima check` proves the rights (leaving nothing
//! behind) and says what is missing in the server's words, and every command quotes them.

use super::*;
use support::postgres::Role;

#[test]
fn a_role_without_create_on_the_schema_is_refused_by_check_in_the_servers_words() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let role = Role::new(&url);
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let env = [("ANIMA_DATABASE_URL", role.url.as_str())];
    let check = home.run_env(&["check"], "", &env);
    assert_eq!(check.status, 2, "{}{}", check.stdout, check.stderr);
    for words in [
        "permission denied for schema public",
        "SQLSTATE 42501",
        "GRANT CREATE ON SCHEMA public",
        "schema's owner",
    ] {
        assert!(check.stdout.contains(words), "{words}: {}", check.stdout);
    }
    let state = home.run_env(&["state"], "", &env);
    assert_ne!(state.status, 0, "{}", state.stdout);
    assert!(
        state.stderr.contains("permission denied for schema public")
            && state.stderr.contains("42501"),
        "{}",
        state.stderr
    );
    assert!(!state.stderr.contains("db error"), "{}", state.stderr);
    assert_eq!(
        query(&url, "SELECT (to_regclass('anima_schema') IS NULL)::text"),
        ["true"],
        "check left nothing"
    );
}

/// The schema's owner migrated it; a role granted the tables runs anima without CREATE, and
/// check names the rights it still lacks (the sequences of the tables' ids).
#[test]
fn a_role_granted_the_tables_of_a_current_schema_passes_check_and_runs() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let role = Role::new(&url);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(anima::memory::postgres::Postgres::connect(&url, 1))
        .unwrap();
    query(
        &url,
        &format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}",
            role.name
        ),
    );
    let model = FakeModel::start();
    model.reply(&answer("Salut ✨"));
    let home = postgres_home(&model);
    let env = [("ANIMA_DATABASE_URL", role.url.as_str())];
    let check = home.run_env(&["check"], "", &env);
    assert_eq!(check.status, 2, "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("lacks rights on")
            && check.stdout.contains("journal_id_seq (sequence: USAGE)"),
        "{}",
        check.stdout
    );
    query(
        &url,
        &format!(
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}",
            role.name
        ),
    );
    let check = home.run_env(&["check"], "", &env);
    assert_eq!(check.status, 0, "{}{}", check.stdout, check.stderr);
    let chat = home.run_env(&["chat", "--user", "Zoë"], "coucou\n", &env);
    assert_eq!(chat.status, 0, "{}", chat.stderr);
    assert_eq!(replies(&chat.stdout), ["Salut ✨"]);
}

/// A statement ended by a `statement_timeout` (here the connection string's, which cuts the
/// schema's creation short) says so in the server's words, not "db error".
#[test]
fn a_statement_cut_by_a_timeout_says_so() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let hurried = format!("{url}?options=-c%20statement_timeout%3D1");
    let state = home.run_env(&["state"], "", &[("ANIMA_DATABASE_URL", &hurried)]);
    assert_ne!(state.status, 0, "{}", state.stdout);
    for words in [
        "canceling statement due to statement timeout",
        "SQLSTATE 57014",
        "statement_timeout",
    ] {
        assert!(state.stderr.contains(words), "{words}: {}", state.stderr);
    }
}
