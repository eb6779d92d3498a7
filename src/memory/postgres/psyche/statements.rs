//! A rule's writes as PostgreSQL statements (`memory::psyche::rule`'s `EventWrites` and
//! `CognitionWrites`), gathered in the order asked for the transaction's last round trip.

use super::{log, memories, rows, Param, Result};
use crate::memory::psyche::{rule, LoggedDecision};
use crate::psyche::classify::Fact;
use crate::psyche::update::NewMemory;
use crate::psyche::{Intention, Relationship, Substrate, Unit};

/// The statements of what a rule decided, in the order it asked for them, for the
/// transaction's last round trip (`pipeline`, `committed`); `soul` whose rows they write.
/// Post-cognition's intentions, two statements of their own, wait in `intentions`.
pub(super) struct Statements<'a> {
    soul: &'a str,
    pub(super) writes: Vec<(&'static str, Vec<Param>)>,
    pub(super) intentions: Vec<Intention>,
}

impl<'a> Statements<'a> {
    pub(super) fn new(soul: &'a str) -> Statements<'a> {
        Statements {
            soul,
            writes: Vec::new(),
            intentions: Vec::new(),
        }
    }

    fn push(&mut self, sql: &'static str, params: Vec<Param>) -> Result<()> {
        self.writes.push((sql, params));
        Ok(())
    }
}

impl rule::EventWrites for Statements<'_> {
    fn boost(&mut self, person: &str, boost: Unit) -> Result<()> {
        let params = memories::boost_params(self.soul, person, boost);
        self.push(memories::BOOST, params)
    }

    fn memory(&mut self, m: &NewMemory, _shared_with: Option<&str>) -> Result<()> {
        self.push(memories::INSERT, memories::insert_params(self.soul, m))
    }

    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<()> {
        let params = rows::relationship_params(self.soul, person, r);
        self.push(rows::SAVE_RELATIONSHIP, params)
    }

    fn facts(&mut self, person: &str, facts: &[Fact], at: i64) -> Result<()> {
        let params = rows::facts_params(self.soul, person, facts, at);
        self.push(rows::SAVE_FACTS, params)
    }

    fn log(&mut self, logged: LoggedDecision) -> Result<()> {
        self.push(log::LOG, log::log_params(self.soul, logged))
    }

    fn state(&mut self, substrate: &Substrate) -> Result<()> {
        self.push(rows::SAVE_STATE, rows::state_params(self.soul, substrate))
    }
}

impl rule::CognitionWrites for Statements<'_> {
    fn state(&mut self, substrate: &Substrate) -> Result<()> {
        rule::EventWrites::state(self, substrate)
    }

    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<()> {
        rule::EventWrites::relationship(self, person, r)
    }

    fn intentions(&mut self, all: Vec<Intention>) -> Result<()> {
        self.intentions = all;
        Ok(())
    }
}
