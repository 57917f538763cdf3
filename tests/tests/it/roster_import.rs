//! `svc-cli roster import` against the real service: the first run registers every row, a
//! rerun of the same file changes nothing.

use clap::Parser;
use futures_util::TryStreamExt;
use svc_cli::client::AgentQuery;
use svc_cli::commands::Cli;

use crate::Service;

const ROSTER: &str = "\
platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
north,North Agency,Ana,Lopez,ana@example.com,1234567,rep-ana
north,North Agency,Ben,Okafor,ben@example.com,,rep-ben
south,South Agency,Cy,Park,,7654321,
";

async fn import(service: &Service, file: &std::path::Path) -> anyhow::Result<()> {
    let base_url = service.base_url();
    let path = file.display().to_string();
    let cli = Cli::try_parse_from([
        "svc-cli",
        "--base-url",
        base_url.as_str(),
        "--api-key",
        service.key.as_str(),
        "--json",
        "roster",
        "import",
        path.as_str(),
    ])
    .expect("arguments parse");
    cli.run().await
}

#[tokio::test]
async fn roster_import_registers_every_row_and_a_rerun_changes_nothing() {
    let service = Service::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("roster.csv");
    std::fs::write(&file, ROSTER).expect("write roster");

    import(&service, &file).await.expect("first import");
    let client = service.client();
    let agents: Vec<_> = client
        .agents(AgentQuery::default())
        .try_collect()
        .await
        .expect("list agents");
    assert_eq!(agents.len(), 3);

    import(&service, &file).await.expect("rerun succeeds");
    let again: Vec<_> = client
        .agents(AgentQuery::default())
        .try_collect()
        .await
        .expect("list agents");
    assert_eq!(again.len(), 3, "a rerun registers nobody twice");
}
