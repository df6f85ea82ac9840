//! What several test areas share: the binaries and run folders (`run`), fake VMs made of
//! namespaces running sshd (`ssh`), qemu guests (`vm`), the keys, subnets and ssh_config both
//! kinds of VM use (`fixture`), damaged histories (`history`), report parsing and synthetic run
//! folders (`report`), the locks on what two tests must not use at once (`exclusive`), and
//! skipped tests said where libtest does not hide them (`skip`).

pub mod exclusive;
pub mod fixture;
pub mod history;
pub mod report;
pub mod run;
pub mod skip;
pub mod ssh;
pub mod vm;
