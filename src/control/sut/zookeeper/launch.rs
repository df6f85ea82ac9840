//! How one ZooKeeper server is started: a plain JVM running `QuorumPeerMain zoo.cfg`, small
//! heap, logging through slf4j-simple to stderr (which `Control` appends to the node's log).

use std::path::{Path, PathBuf};

/// Debian's jars. The zookeeper jar's manifest brings its own dependencies; slf4j-simple is
/// the only binding that logs without a config file (without a binding ZooKeeper logs
/// nothing); servlet-api is what the AdminServer's Jetty needs and the manifest omits
/// (without it the AdminServer silently does not start).
pub const CLASSPATH: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-simple.jar",
    "/usr/share/java/servlet-api.jar",
];

pub const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// The JVM's memory and start-up knobs.
#[derive(Debug, Clone)]
pub struct JvmOptions {
    pub java: PathBuf,
    pub max_heap_mb: u32,
}

impl Default for JvmOptions {
    fn default() -> Self {
        JvmOptions {
            java: PathBuf::from("java"),
            max_heap_mb: 128,
        }
    }
}

/// The command line after `java`, running the jars of `classpath` (see `install::classpath`).
pub fn jvm_args(opts: &JvmOptions, classpath: &str, zoo_cfg: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        format!("-Xmx{}m", opts.max_heap_mb),
        "-Xms16m".into(),
        // One GC thread and C1 only: servers start faster and share two cores with the
        // controller and the other servers; ZooKeeper's hot paths do not need C2 in a test.
        "-XX:+UseSerialGC".into(),
        "-XX:TieredStopAtLevel=1".into(),
        "-Xss512k".into(),
        "-Djava.net.preferIPv4Stack=true".into(),
        // Wall-clock stamps in the log (what libfaketime moves), milliseconds.
        "-Dorg.slf4j.simpleLogger.showDateTime=true".into(),
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ".into(),
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info".into(),
        "-cp".into(),
        classpath.to_string(),
        MAIN_CLASS.into(),
    ];
    args.push(zoo_cfg.display().to_string());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_comes_last_after_the_main_class() {
        let args = jvm_args(
            &JvmOptions::default(),
            &CLASSPATH.join(":"),
            Path::new("/r/n1/zoo.cfg"),
        );
        let n = args.len();
        assert_eq!(args[n - 1], "/r/n1/zoo.cfg");
        assert_eq!(args[n - 2], MAIN_CLASS);
        assert_eq!(args[n - 3], CLASSPATH.join(":"));
        assert!(args.contains(&"-Xmx128m".to_string()));
    }
}
