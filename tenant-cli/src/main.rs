//! `svc-cli` binary: a thin wrapper over the library.

fn main() -> std::process::ExitCode {
    svc_cli::main_entry()
}
