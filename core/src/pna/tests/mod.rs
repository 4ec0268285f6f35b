//! Tests of the PNA tables: reference models (proptest), unit cases, loom models.

#[cfg(not(loom))]
mod exact_model;
#[cfg(not(loom))]
mod exact_unit;
#[cfg(loom)]
mod loom_events;
#[cfg(loom)]
mod loom_expiry;
#[cfg(loom)]
mod loom_models;
