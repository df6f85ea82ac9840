//! TODO

pub mod txnlog;
pub mod zab;
