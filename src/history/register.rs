//! The value of a register operation in the history (workload `register`: `f` is `read`,
//! `set`, `cas` or `create`), written by the workload and read by the client-view checkers:
//! one type, so the two never guess each other's keys.
//!
//! A key is a versioned register, as a ZooKeeper znode: `create` makes it at version 0, `set`
//! and a successful `cas` add one to its version, a read returns its value and version
//! (`value` None, `version` -1: no such key).
//!
//! | f | invoke | ok adds |
//! |---|---|---|
//! | `create` | `key`, `value` | `version` (0), `zxid` |
//! | `set` | `key`, `value` | `version` (the new one), `zxid` |
//! | `cas` | `key`, `expect` (the version it must find), `value` | `version`, `zxid` |
//! | `read` | `key`, `sync` (true: a ZooKeeper `sync` first, on the same session) | `value`, `version`, `zxid` (last applied on the server) |
//!
//! `fail` (certainly not applied: refused, or never sent) and `info` (unknown: a timeout) repeat
//! the invoke's fields and add `error`.

use serde::{Deserialize, Serialize};

/// One register operation's value (see the module's table for which fields each line has).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterValue {
    pub key: String,
    /// Written (create, set, cas) or read (None on a read: no such key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// `cas`: the version the key must have for the write to happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<i64>,
    /// On `ok`: the version the write left, or the version read (-1: no such key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// `read`: preceded by a `sync` on the same session (ZooKeeper's sync + read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sync: bool,
    /// On `ok`: the write's zxid, or the last zxid the reading server had applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zxid: Option<u64>,
    /// On `fail` / `info`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RegisterValue {
    /// The value as the history stores it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips_and_leaves_out_what_it_lacks() {
        let v = RegisterValue {
            key: "k1".into(),
            value: Some(7),
            expect: Some(3),
            ..Default::default()
        };
        let text = v.to_json().to_string();
        assert_eq!(text, r#"{"expect":3,"key":"k1","value":7}"#);
        let back: RegisterValue = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        let read: RegisterValue =
            serde_json::from_str(r#"{"key":"k2","sync":true,"value":null,"version":-1}"#).unwrap();
        assert!(read.sync && read.value.is_none() && read.version == Some(-1));
    }
}
