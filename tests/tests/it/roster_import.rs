//! `svc-cli roster import` against the real service: the first run registers every row, a
//! rerun of the same file changes nothing.

use clap::Parser;
use futures_util::TryStreamExt;
use svc_cli::commands::Cli;
use svc_client::AgentQuery;

use crate::Service;

const ROSTER: &str = "\
platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
north,North Agency,Ana,Lopez,ana@example.com,1234567,rep-ana
north,North Agency,Ben,Okafor,ben@example.com,,rep-ben
south,South Agency,Cy,Park,,7654321,
";

async fn import(service: &Service, file: &std::path::Path) -> anyhow::Result<()> {
    import_with(service, file, &[]).await
}

async fn import_with(
    service: &Service,
    file: &std::path::Path,
    extra: &[&str],
) -> anyhow::Result<()> {
    let base_url = service.base_url();
    let path = file.display().to_string();
    let mut args = vec![
        "svc-cli",
        "--base-url",
        base_url.as_str(),
        "--api-key",
        service.key.as_str(),
        "--json",
        "roster",
        "import",
        path.as_str(),
    ];
    args.extend_from_slice(extra);
    let cli = Cli::try_parse_from(args).expect("arguments parse");
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

/// New reps whose email or NPN is already another rep's (Ana's, from the first import): the
/// service answers AGENT_ALREADY_EXISTS naming Ana, and the import must not take them for a
/// rerun. Cy's row beside them (NPN only, from the first import) is still a rerun.
const CLASHES: &str = "\
platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
north,North Agency,Dee,Vance,ANA@Example.com,,rep-dee
north,North Agency,Eli,Moss,,123-4567,rep-eli
south,South Agency,Cy,Park,,7654321,
";

#[tokio::test]
async fn a_new_rep_sharing_another_reps_email_or_npn_is_a_conflict_not_a_rerun() {
    let service = Service::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("roster.csv");
    std::fs::write(&file, ROSTER).expect("write roster");
    import(&service, &file).await.expect("first import");

    let clashes = dir.path().join("clashes.csv");
    std::fs::write(&clashes, CLASHES).expect("write clashes");
    let report = dir.path().join("report.csv");
    let report_arg = report.display().to_string();
    let err = import_with(&service, &clashes, &["--report", report_arg.as_str()])
        .await
        .expect_err("conflicts fail the import");
    assert_eq!(svc_cli::exit::code_for(&err), 1, "{err:#}");

    let text = std::fs::read_to_string(&report).expect("report");
    let outcomes: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            (cells[2].to_owned(), cells[5].to_owned())
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("rep-dee".to_owned(), "conflict".to_owned()),
            ("rep-eli".to_owned(), "conflict".to_owned()),
            (String::new(), "already_registered".to_owned()),
        ],
        "{text}"
    );
    let agents: Vec<_> = service
        .client()
        .agents(AgentQuery::default())
        .try_collect()
        .await
        .expect("list agents");
    assert_eq!(
        agents.len(),
        3,
        "nobody was registered by the clashing rows"
    );
}
