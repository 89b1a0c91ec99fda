//! Helpers for Lull's end-to-end tests: locating the built `lull` binary, temporary
//! owner directories, and waiting on real processes.
