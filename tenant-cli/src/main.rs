//! `svc-cli` binary: a thin wrapper over the library.

fn main() {
    eprintln!("svc-cli: not yet built");
    std::process::exit(1);
}
