//! `svc-service`: serve the v1 API and run the operator commands.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    svc_service::cli::main().await
}
