//! `docs/cli.md` is generated from the clap definitions in `main.rs`; this test fails when it is stale.

use clap::CommandFactory as _;

/// The reference page as clap-markdown renders `Cli` (its footer left out: the book says where it comes from).
fn generated() -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("CLI reference".to_string())
        .show_footer(false)
        .show_table_of_contents(true);
    let command = super::Cli::command();
    clap_markdown::help_markdown_command_custom(&command, &options)
}

#[test]
fn docs_cli_md_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
    let generated = generated();
    if std::env::var_os("UPDATE_CLI_DOC").is_some() {
        std::fs::write(path, &generated).expect("write docs/cli.md");
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/cli.md is stale: regenerate it with `UPDATE_CLI_DOC=1 cargo test -p insitu --bin insitu cli_doc`"
    );
}

#[test]
fn reference_documents_every_subcommand() {
    let page = generated();
    for sub in super::Cli::command().get_subcommands() {
        let heading = format!("## `insitu {}`", sub.get_name());
        assert!(page.contains(&heading), "docs/cli.md lacks {heading}");
    }
}
