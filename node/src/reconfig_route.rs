//! `POST /reconfig`: an incremental reconfig as ZooKeeper's `reconfig -add ... -remove ...`.
//!
//! The body is a [`Change`] (`{"add": ["server.4=host:q:e:participant;host:http"],
//! "remove": [3]}`). The leader checks it against the config in force, proposes it as one txn
//! and answers once it committed (200, the new version and config); a follower forwards it to
//! the leader unchecked (its own config may lag), as it does writes; a looking server says
//! 503. A change that makes no sense is 400 with the reason; one the leader cannot take now
//! (another reconfig pending, no quorum of the new voters synced) is 503 and certainly not
//! applied.

use serde_json::Value;

use crate::api::ReconfigDone;
use crate::membership::{reconfig_value, Change, Members, Membership};
use crate::write_route::{error, Route, Writes};

/// Answers one reconfig: (HTTP status, JSON body).
pub async fn handle(
    writes: &Writes,
    members: &Members,
    body: &[u8],
    forwarded: bool,
) -> (u16, Value) {
    let change: Change = match serde_json::from_slice(body) {
        Ok(c) => c,
        Err(e) => {
            return error(
                400,
                format!("the body must be JSON {{\"add\": [\"server.N=host:quorumPort:electionPort[:role][;host:port]\"], \"remove\": [N]}}: {e}"),
                None,
            )
        }
    };
    // Only the leader checks the change, against the config in force: a follower's may lag.
    match writes.current() {
        Route::Looking => error(
            503,
            "looking for a leader; the reconfig was not applied (retry later)".into(),
            None,
        ),
        Route::Following { leader } if forwarded => error(
            503,
            format!("not the leader any more (following {leader}); not applied"),
            Some(leader),
        ),
        Route::Following { leader } => writes.forward(leader, "/reconfig", &change).await,
        Route::Leading(tx) => {
            let current: Membership = members.borrow().clone();
            let servers = match change.apply_to(&current) {
                Ok(s) => s,
                Err(why) => return error(400, format!("reconfig refused: {why}"), None),
            };
            match writes.commit(tx, reconfig_value(&servers)).await {
                Ok(zxid) => {
                    let done = Membership {
                        version: zxid,
                        servers,
                    };
                    let body = ReconfigDone {
                        config: done.text(),
                        version: format!("{zxid:x}"),
                    };
                    (200, serde_json::to_value(body).unwrap_or_default())
                }
                Err(answer) => answer,
            }
        }
    }
}
