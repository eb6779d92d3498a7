//! The psychology on SQLite: an event, its keyed form, the packet, post-cognition, the
//! operator's view and the gate's log, each one write transaction or one read on the store's
//! connection. What they decide is `memory::psyche::rule`'s (the rules PostgreSQL runs too);
//! the statements they are made of are `memory::psyche`'s free functions over a `Connection`.
//! Two events never interleave: each reads the soul's row inside its own IMMEDIATE
//! transaction.

use async_trait::async_trait;

use super::{Result, Sqlite};
use crate::memory::faces::Psychology;
use crate::memory::psyche::{self, rule, LoggedDecision, Mind, Place};
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::Effects;
use crate::psyche::{Event, Psyche};

#[async_trait]
impl Psychology for Sqlite {
    /// One write transaction: the soul's row read, the event applied and gated, the row
    /// written back with the new state and the decision's line. A `Speak` starts the cooldown.
    async fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision)> {
        let (soul, psyche, rules) = (soul.to_owned(), psyche.clone(), rules.clone());
        let (event, place) = (event.clone(), place.clone());
        self.call(move |db| {
            db.write(|tx| {
                let mut row = psyche::soul_row(tx, &soul, &psyche, event.at)?;
                let applied =
                    psyche::event_in(tx, &soul, &psyche, &rules, &event, &place, &mut row)?;
                psyche::settle(tx, &soul, row)?;
                Ok(applied)
            })
        })
        .await
    }

    /// As `psyche_event`, the key looked up and marked seen in the same transaction, so a
    /// retried turn does not move the substrate twice.
    async fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>> {
        let (soul, psyche, rules) = (soul.to_owned(), psyche.clone(), rules.clone());
        let (event, place, key) = (event.clone(), place.clone(), key.to_owned());
        self.call(move |db| {
            db.write(|tx| {
                let mut row = psyche::soul_row(tx, &soul, &psyche, event.at)?;
                if psyche::applied_before(tx, &soul, &row, &key)? {
                    return Ok(None);
                }
                let applied =
                    psyche::event_in(tx, &soul, &psyche, &rules, &event, &place, &mut row)?;
                psyche::mark_applied(tx, &soul, &mut row, &key, event.at)?;
                psyche::settle(tx, &soul, row)?;
                Ok(Some(applied))
            })
        })
        .await
    }

    /// One read: the state, the people's relationships and facts, retrieval's candidates and
    /// the intentions, then `rule::packet`.
    async fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet> {
        let (soul, psyche) = (soul.to_owned(), psyche.clone());
        let (people, query) = (people.to_vec(), query.to_owned());
        self.call(move |db| {
            let read = psyche::packet_read(&db.conn(), &soul, &psyche, &people, &query, now)?;
            Ok(rule::packet(read, &psyche, &people, &query, now))
        })
        .await
    }

    /// One write transaction: what the shifts touch read, `rule::post_cognition`, its writes.
    async fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>> {
        let (soul, psyche) = (soul.to_owned(), psyche.clone());
        let (shifts, updates) = (shifts.to_vec(), updates.to_vec());
        self.call(move |db| {
            db.write(|tx| {
                let (read, mut writes) = psyche::cognition_read(tx, &soul, &psyche, &shifts, now)?;
                rule::post_cognition(&read, &shifts, &updates, &psyche, now, &mut writes)
            })
        })
        .await
    }

    async fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind> {
        let (soul, psyche) = (soul.to_owned(), psyche.clone());
        let person = person.map(str::to_owned);
        self.call(move |db| psyche::read_mind(&db.conn(), &soul, &psyche, person.as_deref(), now))
            .await
    }

    async fn psyche_decisions(&self, soul: &str, limit: usize) -> Result<Vec<LoggedDecision>> {
        let soul = soul.to_owned();
        self.call(move |db| psyche::decisions(&db.conn(), &soul, None, limit))
            .await
    }
}
