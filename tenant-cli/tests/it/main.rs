//! Integration tests of `svc-cli`: the library client against wiremock fixtures, and the real
//! binary (one temp dir per test) for every command.

mod browser;
mod commands;
mod config;
mod console;
mod full_disk;
mod hardening;
mod helpers;
mod inbox;
mod ops;
mod pipes;
mod postgres;
mod postgres_network;
mod practice;
mod readme_flow;
mod reconcile;
mod reference_keys;
mod roster;
mod sandbox;
mod sandbox_tools;
mod skips;
mod store_report;
mod traces;
mod transport;
mod webhook_serve;
mod webhook_serve_reload;
mod webhook_sign;
mod webhook_verify;
