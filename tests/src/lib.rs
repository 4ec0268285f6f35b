//! Shared helpers for the host integration tests.
