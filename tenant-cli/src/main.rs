//! `svc-cli` binary: a thin wrapper over the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    svc_cli::run(svc_cli::Cli::parse())
}
