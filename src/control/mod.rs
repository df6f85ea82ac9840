//! Where nodes run and how the controller drives them.

pub mod clean;
