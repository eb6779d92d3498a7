//! The store's conformance suite: each face's promises, checked through the face itself on
//! every backend. SQLite always; PostgreSQL too when `ANIMA_TEST_POSTGRES_URL` names a server
//! (each test gets a database of its own there), and the run says when it is skipped.

mod backends;
mod budgets;
mod claims;
mod conformance;
mod dossier_face;
mod dreams;
mod forget;
mod inbox;
mod psychology;
mod traces;
mod turns;
