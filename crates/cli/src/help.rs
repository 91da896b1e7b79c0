//! `help`, `completions` and `man`: generated from the same command definitions as the parser,
//! and `help config`, the configuration reference (docs/configuration.md, kept in the binary).

use anyhow::bail;

use crate::{Outcome, output};

/// The configuration reference, every key of every table.
pub(crate) const CONFIGURATION: &str = include_str!("../../../docs/configuration.md");

/// `help [COMMAND...]` or `help config`.
pub(crate) fn help(topic: &[String]) -> anyhow::Result<Outcome> {
    if topic.len() == 1 && topic[0] == "config" {
        output::stdout(CONFIGURATION)?;
        return Ok(Outcome::Success);
    }
    let mut command = crate::command_line();
    command.build();
    let mut current = &mut command;
    for name in topic {
        let path = current.get_bin_name().unwrap_or("mcp-harness").to_owned();
        match current.find_subcommand_mut(name) {
            Some(sub) => current = sub,
            None => bail!(
                "no command `{path} {}`; `mcp-harness help` lists them, `help config` the configuration",
                output::one_line(name, 60)
            ),
        }
    }
    output::stdout(&format!("{}\n", current.render_long_help()))?;
    Ok(Outcome::Success)
}

/// `completions SHELL`.
pub(crate) fn completions(shell: clap_complete::Shell) -> anyhow::Result<Outcome> {
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut crate::command_line(), "mcp-harness", &mut buffer);
    output::stdout(&String::from_utf8_lossy(&buffer))?;
    Ok(Outcome::Success)
}

/// `man`.
pub(crate) fn man() -> anyhow::Result<Outcome> {
    let mut buffer = Vec::new();
    clap_mangen::Man::new(crate::command_line()).render(&mut buffer)?;
    output::stdout(&String::from_utf8_lossy(&buffer))?;
    Ok(Outcome::Success)
}
