//! What can go wrong with a store: each error says which store, and what to do about it.

use std::path::PathBuf;

use super::keys::SCHEMA;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the store at `{path}` is in use by another memctl process{holder}, and stayed so for {waited_secs:.0} s\n\
         help: wait for it to finish, raise the wait with MEMCTL_STORE_WAIT=SECONDS, or use another store with \
         `--store PATH` (or MEMCTL_STORE)"
    )]
    Locked { path: PathBuf, holder: String, waited_secs: f64 },
    /// `reason` is text, not a source, so that the chain prints the cause once.
    #[error("cannot open the store at `{path}`: {reason}")]
    Open { path: PathBuf, reason: String },
    /// The store is there but this process may not write it: it is read from a copy.
    #[error("cannot open the store at `{path}`: {reason}")]
    Unwritable { path: PathBuf, reason: String },
    #[error(
        "the store at `{path}` cannot be written here ({reason}): memctl can read it, but this command writes to it\n\
         help: run it as a user who may write the folder, or copy the folder somewhere writable and pass the \
         copy to `--store`"
    )]
    ReadOnly { path: PathBuf, reason: String },
    #[error(
        "no store at `{0}`\n\
         help: check `--store` (or MEMCTL_STORE); `memctl sweep` creates a store where it is told to"
    )]
    Missing(PathBuf),
    #[error(
        "run {id} is still running (process {pid} on {host}); stop its sweep first (Ctrl-C checkpoints it), then delete it"
    )]
    StillRunning { id: u64, pid: u32, host: String },
    #[error("the store at `{path}` has schema {found}, but this memctl reads schema {SCHEMA}")]
    Schema { path: PathBuf, found: String },
    #[error("store error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt run record {id}: {reason}")]
    Corrupt { id: u64, reason: String },
    #[error("no run with id {0}")]
    NoSuchRun(u64),
    #[error("corrupt search study `{key}`: {reason}")]
    CorruptStudy { key: String, reason: String },
    #[error("checkpoint of trial {trial}: {reason}")]
    Checkpoint { trial: String, reason: String },
}
