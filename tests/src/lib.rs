//! End-to-end tests across the workspace members live in `tests/`; this library is empty.
