//! Which log lines fle-node and fle-chaos print: `Targets` directives ("debug",
//! "fle_node::peers=debug,info") read from an environment variable, `info` when it is unset or
//! does not parse. One definition for both binaries.

use tracing_subscriber::filter::{LevelFilter, Targets};

/// The filter named by `var`, or `info` for every target.
pub fn from_env(var: &str) -> Targets {
    std::env::var(var)
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn directives_filter_by_target_and_an_unset_variable_means_info() {
        let f: Targets = "fle_node::peers=debug,warn".parse().unwrap();
        assert!(f.would_enable("fle_node::peers", &Level::DEBUG));
        assert!(!f.would_enable("fle_node::zab", &Level::INFO));
        assert!(f.would_enable("fle_node::zab", &Level::WARN));
        let default = from_env("FLC_TEST_LOG_FILTER_NEVER_SET");
        assert!(default.would_enable("anything", &Level::INFO));
        assert!(!default.would_enable("anything", &Level::DEBUG));
    }
}
