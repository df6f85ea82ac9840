//! The control layer on real namespaces: the fle-node target and its observers, and the namespaces
//! themselves.
mod fle_node;
mod netns;
