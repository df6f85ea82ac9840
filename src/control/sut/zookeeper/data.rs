//! The `register` workload's keys in real ZooKeeper: one znode per key under [`DATA_PATH`],
//! its data the value in decimal, its `version` the register's version, through the same
//! per-server sessions as the writes (`client::Sessions`): create, setData (version -1),
//! setData with a version (compare-and-set), and getData after an optional `sync`.
//!
//! Outcomes as the writes': ZooKeeper's refusals (NodeExists, NoNode, BadVersion) are `fail`,
//! a lost connection or a timeout `info`; a read that fails for any reason changed nothing.

use super::client::{NoSession, Sessions};
use crate::api::{DataOp, DataRead, DataWritten};
use crate::control::sut::DataOutcome;
use zookeeper_client as zk;

/// The parent of the keys' znodes.
pub const DATA_PATH: &str = "/fle-chaos-data";

fn path_of(key: &str) -> String {
    format!("{DATA_PATH}/{key}")
}

impl Sessions {
    /// The node's connected session, or why nothing can be sent.
    pub(super) async fn connected(&self, node: &str) -> Result<zk::Client, String> {
        let client = self.session(node).await.map_err(|NoSession(e)| e)?;
        match client.state() {
            zk::SessionState::SyncConnected => Ok(client),
            state => Err(format!("session with {node} is {state:?}; not sent")),
        }
    }

    /// One create / set / cas of a key through `node`.
    pub async fn data_write(&self, node: &str, op: &DataOp) -> DataOutcome<DataWritten> {
        let client = match self.connected(node).await {
            Ok(c) => c,
            Err(e) => return DataOutcome::Unavailable(e),
        };
        let path = path_of(op.key());
        let attempt = async {
            let stat = match op {
                DataOp::Create { value, .. } => {
                    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                    match client.create(DATA_PATH, b"", &options).await {
                        Ok(_) | Err(zk::Error::NodeExists) => {}
                        Err(e) => return Err(e),
                    }
                    client
                        .create(&path, value.to_string().as_bytes(), &options)
                        .await?
                        .0
                }
                DataOp::Set { value, .. } => {
                    client
                        .set_data(&path, value.to_string().as_bytes(), None)
                        .await?
                }
                DataOp::Cas { version, value, .. } => {
                    let expect = i32::try_from(*version).map_err(|_| {
                        zk::Error::BadArguments(&"a znode version is a 32-bit integer")
                    })?;
                    let data = value.to_string();
                    client
                        .set_data(&path, data.as_bytes(), Some(expect))
                        .await?
                }
            };
            Ok(DataWritten {
                version: i64::from(stat.version),
                zxid: stat.mzxid as u64,
            })
        };
        match tokio::time::timeout(self.opts.write_timeout, attempt).await {
            Ok(Ok(w)) => DataOutcome::Ok(w),
            Ok(Err(e @ (zk::Error::NodeExists | zk::Error::NoNode | zk::Error::BadVersion))) => {
                DataOutcome::Refused(format!("{e}"))
            }
            Ok(Err(e)) => {
                self.outcome_of_error(node, e, DataOutcome::Unavailable)
                    .await
            }
            Err(_) => DataOutcome::Info(format!("no answer within {:?}", self.opts.write_timeout)),
        }
    }

    /// One getData of a key on `node`, after a `sync` when `sync`.
    pub async fn data_read(&self, node: &str, key: &str, sync: bool) -> DataOutcome<DataRead> {
        let client = match self.connected(node).await {
            Ok(c) => c,
            Err(e) => return DataOutcome::Unavailable(e),
        };
        let path = path_of(key);
        let attempt = async {
            if sync {
                client.sync(&path).await?;
            }
            match client.get_data(&path).await {
                Ok((data, stat)) => Ok(DataRead {
                    key: key.to_string(),
                    value: std::str::from_utf8(&data).ok().and_then(|t| t.parse().ok()),
                    version: i64::from(stat.version),
                    zxid: stat.mzxid as u64,
                }),
                Err(zk::Error::NoNode) => Ok(DataRead {
                    key: key.to_string(),
                    value: None,
                    version: -1,
                    zxid: 0,
                }),
                Err(e) => Err(e),
            }
        };
        match tokio::time::timeout(self.opts.write_timeout, attempt).await {
            Ok(Ok(r)) => DataOutcome::Ok(r),
            // A read changes nothing: whether it failed or timed out, it is `info` only when
            // it may still be answered, which no one waits for.
            Ok(Err(e)) => {
                self.outcome_of_error(node, e, DataOutcome::Unavailable)
                    .await
            }
            Err(_) => DataOutcome::Info(format!("no answer within {:?}", self.opts.write_timeout)),
        }
    }
}
