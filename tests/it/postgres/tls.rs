//! `sslmode` and its files with libpq's meanings, against the test server (TLS on, its
//! certificate for 127.0.0.1 and `localhost`, signed by the CA `ANIMA_TEST_POSTGRES_CA` names).
//! A refused connection is the configuration's to fix: `anima check` exits 2 saying why.

use super::*;

/// The test server's CA file, or `None` (said) when it is not configured.
fn server_ca() -> Option<String> {
    let ca = std::env::var("ANIMA_TEST_POSTGRES_CA")
        .ok()
        .filter(|c| !c.is_empty());
    if ca.is_none() {
        eprintln!("TLS skipped: ANIMA_TEST_POSTGRES_CA (the test server's CA) is not set");
    }
    ca
}

/// `url` with `params` added to its query.
fn with(url: &str, params: &str) -> String {
    match url.contains('?') {
        true => format!("{url}&{params}"),
        false => format!("{url}?{params}"),
    }
}

/// `url` naming the server by `host` while connecting to its address (`hostaddr`): the name
/// the certificate is checked against is `host`. `url` has no parameters yet.
fn named(url: &str, host: &str) -> String {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let tokio_postgres::config::Host::Tcp(addr) = &config.get_hosts()[0] else {
        panic!("the test server is on TCP");
    };
    let port = config.get_ports()[0];
    with(
        &url.replacen(&format!("@{addr}:{port}"), &format!("@{host}:{port}"), 1),
        &format!("hostaddr={addr}"),
    )
}

fn check(home: &Home, url: &str, env: &[(&str, &str)]) -> Run {
    let mut all = vec![("ANIMA_DATABASE_URL", url)];
    all.extend_from_slice(env);
    home.run_env(&["check"], "", &all)
}

fn refused(run: &Run, words: &[&str]) {
    assert_eq!(run.status, 2, "{}{}", run.stdout, run.stderr);
    for w in words {
        assert!(run.stdout.contains(w), "{w}: {}", run.stdout);
    }
}

fn connected(run: &Run) {
    assert_eq!(run.status, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("database: PostgreSQL"),
        "{}",
        run.stdout
    );
}

#[test]
fn verify_full_refuses_a_certificate_for_another_host_and_verify_ca_takes_it() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let Some(ca) = server_ca() else { return };
    let model = FakeModel::start();
    model.reply(&answer("Chiffré 🔒"));
    let home = postgres_home(&model);
    let full = with(&url, &format!("sslmode=verify-full&sslrootcert={ca}"));
    let r = home.run_env(
        &["chat", "--user", "Zoë"],
        "secret ?\n",
        &[("ANIMA_DATABASE_URL", &full)],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), ["Chiffré 🔒"]);
    let tls = format!("sslmode=verify-full&sslrootcert={ca}");
    connected(&check(&home, &with(&named(&url, "localhost"), &tls), &[]));
    // The same server under a name its certificate does not carry.
    let elsewhere = with(&named(&url, "db.example.invalid"), &tls);
    refused(
        &check(&home, &elsewhere, &[]),
        &[
            "TLS",
            "not valid for name",
            "db.example.invalid",
            "verify-ca",
        ],
    );
    let chat = home.run_env(
        &["chat", "--user", "Zoë"],
        "encore\n",
        &[("ANIMA_DATABASE_URL", &elsewhere)],
    );
    assert_eq!(chat.status, 2, "{}", chat.stderr);
    assert_eq!(model.requests().len(), 1, "no turn without the database");
    // verify-ca checks the chain, not the name.
    let ca_only = with(
        &named(&url, "db.example.invalid"),
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    connected(&check(&home, &ca_only, &[]));
}

#[test]
fn a_certificate_of_another_ca_is_refused_when_checked_and_taken_when_not() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    if server_ca().is_none() {
        return;
    }
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let other = home.dir.path().join("other-ca.pem");
    std::fs::write(&other, OTHER_CA).unwrap();
    let other = other.to_str().unwrap();
    for mode in ["verify-ca", "verify-full", "require"] {
        // require with a root file is verify-ca (libpq's rule).
        refused(
            &check(
                &home,
                &with(&url, &format!("sslmode={mode}&sslrootcert={other}")),
                &[],
            ),
            &["TLS", "UnknownIssuer", "signed by a trusted root"],
        );
    }
    refused(
        &check(
            &home,
            &with(&url, "sslmode=verify-full"),
            &[("SSL_CERT_FILE", other)],
        ),
        &["TLS", "UnknownIssuer"],
    );
    // require and prefer encrypt without checking the certificate, as libpq does.
    for mode in ["require", "prefer"] {
        connected(&check(
            &home,
            &with(&url, &format!("sslmode={mode}")),
            &[("SSL_CERT_FILE", other)],
        ));
    }
}

#[test]
fn a_server_without_tls_is_refused_by_require_saying_so() {
    // A server that answers the request for TLS with "no", as PostgreSQL with ssl = off does.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut request = [0u8; 8];
            if std::io::Read::read_exact(&mut conn, &mut request).is_ok() {
                let _ = std::io::Write::write_all(&mut conn, b"N");
            }
        }
    });
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let url = format!("postgres://anima:secret-31@{addr}/anima?sslmode=require");
    let run = check(&home, &url, &[]);
    refused(&run, &["TLS: server does not support TLS"]);
    assert!(!run.stdout.contains("secret-31"));
}

#[test]
fn a_client_key_that_cannot_be_read_is_named() {
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let cert = home.dir.path().join("client.crt");
    std::fs::write(&cert, OTHER_CA).unwrap();
    let cert = cert.to_str().unwrap();
    let nowhere = home.dir.path().join("no such dir/client.key");
    let nowhere = nowhere.to_str().unwrap();
    let url = |key: &str| {
        format!("postgres://anima:pw@127.0.0.1:9/anima?sslmode=require&sslcert={cert}&sslkey={key}")
    };
    refused(&check(&home, &url(nowhere), &[]), &["sslkey", nowhere]);
    // A file that is not a key: the certificate itself.
    refused(
        &check(&home, &url(cert), &[]),
        &["sslkey", cert, "no private key"],
    );
    let lone = "postgres://anima:pw@127.0.0.1:9/anima?sslmode=verify-full&sslcert=/c.pem";
    refused(
        &check(&home, lone, &[]),
        &["sslcert and sslkey go together"],
    );
}

/// `.ci/postgres` leaves a client certificate for the role `anima_cert` beside its CA, and
/// the server lets that role in by it alone.
#[test]
fn a_client_certificate_logs_its_role_in() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let Some(ca) = server_ca() else { return };
    let dir = std::path::Path::new(&ca).parent().unwrap();
    let (cert, key) = (dir.join("client.crt"), dir.join("client.key"));
    if !cert.exists() || !key.exists() {
        return eprintln!("client certificate skipped: no client.crt and client.key beside {ca}");
    }
    query(&url, "GRANT CREATE ON SCHEMA public TO anima_cert");
    let as_cert = support::postgres::as_user(&url, "anima_cert", "");
    let model = FakeModel::start();
    model.reply(&answer("Je te reconnais."));
    let home = postgres_home(&model);
    let tls = format!("sslmode=verify-full&sslrootcert={ca}");
    let without = check(&home, &with(&as_cert, &tls), &[]);
    refused(&without, &["certificate"]);
    let by_cert = with(
        &as_cert,
        &format!("{tls}&sslcert={}&sslkey={}", cert.display(), key.display()),
    );
    let chat = home.run_env(
        &["chat", "--user", "Zoë"],
        "c'est moi\n",
        &[("ANIMA_DATABASE_URL", &by_cert)],
    );
    assert_eq!(chat.status, 0, "{}", chat.stderr);
    assert_eq!(replies(&chat.stdout), ["Je te reconnais."]);
}
