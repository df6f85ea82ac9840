//! Where nodes run and how they are reached (Jepsen's `control`): the local backend
//! (`local`, with network namespaces from `netns`), the SSH backend (`ssh`), and what every
//! backend shares: the registry of what a run created (`registry`), its removal (`teardown`,
//! `clean`), reaping (`reaper`) and preparing a host (`os_setup`, `apt`).

pub mod apt;
pub mod clean;
pub mod local;
pub mod netns;
pub mod os_setup;
pub mod reaper;
pub mod registry;
pub mod resource;
pub mod ssh;
pub mod teardown;
