//! `svc-service`: serve the v1 API and run the operator commands.

fn main() {
    eprintln!("svc-service: not yet built");
    std::process::exit(1);
}
