//! `fle-node`: one ZooKeeper-style server (Fast Leader Election + Zab). See `fle_chaos::node`.

fn main() {
    eprintln!("fle-node: not yet implemented");
    std::process::exit(2);
}
