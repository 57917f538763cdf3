//! Integration tests of svc-contract: the signature scheme against the shared vectors, its
//! properties, and hostile input.

mod helpers;
mod hostile;
mod properties;
mod vectors;
