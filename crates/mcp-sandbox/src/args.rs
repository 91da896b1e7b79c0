//! The launcher's command line: a [`Policy`] and the server's command, as arguments (paths need
//! not be UTF-8, so no JSON). Pure.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::policy::{Grant, Limits, Policy, Presence};

/// What one launcher run does: apply `policy`, then run `program` with `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The confinement.
    pub policy: Policy,
    /// The server's program, absolute.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// Marks the launcher's second stage, the init of the server's PID namespace; its value names
/// the namespaces the first stage obtained.
pub(crate) const INIT_FLAG: &str = "--init";

impl Launch {
    /// The arguments that [`Launch::parse`] reads back.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        let mut flag = |name: &str, value: OsString| {
            out.push(name.into());
            out.push(value);
        };
        if !self.policy.network {
            flag("--network", "off".into());
        }
        let Limits { memory_mib, processes, open_files, cpu_seconds } = self.policy.limits;
        for (name, value) in [
            ("--memory-mib", memory_mib),
            ("--processes", processes),
            ("--open-files", open_files),
            ("--cpu-seconds", cpu_seconds),
        ] {
            if let Some(v) = value {
                flag(name, v.to_string().into());
            }
        }
        for g in &self.policy.grants {
            let name = match (g.write, g.presence) {
                (false, Presence::Required) => "--read",
                (true, Presence::Required) => "--write",
                (false, Presence::IfExists) => "--read-if-exists",
                (true, Presence::IfExists) => "--write-if-exists",
                (false, Presence::Create) => "--read-create",
                (true, Presence::Create) => "--write-create",
            };
            flag(name, g.path.clone().into_os_string());
        }
        for p in &self.policy.protected {
            flag("--protect", p.clone().into_os_string());
        }
        out.push("--".into());
        out.push(self.program.clone().into_os_string());
        out.extend(self.args.iter().cloned());
        out
    }

    /// Reads [`Launch::to_args`]'s output, and the second stage's init flag when present.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<(Self, Option<String>), String> {
        let mut args = args.into_iter();
        let limits = Limits { memory_mib: None, processes: None, open_files: None, cpu_seconds: None };
        let mut policy = Policy { grants: Vec::new(), protected: Vec::new(), network: true, limits };
        let mut init = None;
        loop {
            let Some(flag) = args.next() else {
                return Err("the server's command is missing (after --)".to_owned());
            };
            let flag = flag.to_str().ok_or_else(|| format!("unknown argument {flag:?}"))?.to_owned();
            if flag == "--" {
                break;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            if flag == INIT_FLAG {
                init = Some(value.to_string_lossy().into_owned());
                continue;
            }
            let number = |v: &OsStr| -> Result<u64, String> {
                v.to_str().and_then(|s| s.parse().ok()).ok_or_else(|| format!("{flag} needs a number, not {v:?}"))
            };
            let mut grant = |write: bool, presence: Presence| {
                policy.grants.push(Grant { path: PathBuf::from(&value), write, presence });
            };
            match flag.as_str() {
                "--read" => grant(false, Presence::Required),
                "--write" => grant(true, Presence::Required),
                "--read-if-exists" => grant(false, Presence::IfExists),
                "--write-if-exists" => grant(true, Presence::IfExists),
                "--read-create" => grant(false, Presence::Create),
                "--write-create" => grant(true, Presence::Create),
                "--protect" => policy.protected.push(PathBuf::from(&value)),
                "--network" if value == "off" => policy.network = false,
                "--memory-mib" => policy.limits.memory_mib = Some(number(&value)?),
                "--processes" => policy.limits.processes = Some(number(&value)?),
                "--open-files" => policy.limits.open_files = Some(number(&value)?),
                "--cpu-seconds" => policy.limits.cpu_seconds = Some(number(&value)?),
                _ => return Err(format!("unknown argument {flag} {value:?}")),
            }
        }
        let program = PathBuf::from(args.next().ok_or_else(|| "the server's command is missing".to_owned())?);
        Ok((Self { policy, program, args: args.collect() }, init))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn path() -> impl Strategy<Value = PathBuf> {
        proptest::collection::vec("[a-z.\\- ]{1,6}", 1..4).prop_map(|parts| {
            let mut p = PathBuf::from("/");
            p.extend(parts);
            p
        })
    }

    proptest! {
        #[test]
        fn arguments_read_back(
            grants in proptest::collection::vec((path(), any::<bool>(), 0..3u8), 0..6),
            protected in proptest::collection::vec(path(), 0..4),
            network in any::<bool>(),
            limits in proptest::array::uniform4(proptest::option::of(any::<u64>())),
            args in proptest::collection::vec("[ -~]{0,8}", 0..4),
        ) {
            let policy = Policy {
                grants: grants
                    .into_iter()
                    .map(|(path, write, presence)| {
                        let presence = [Presence::Required, Presence::IfExists, Presence::Create][usize::from(presence)];
                        Grant { path, write, presence }
                    })
                    .collect(),
                protected,
                network,
                limits: Limits { memory_mib: limits[0], processes: limits[1], open_files: limits[2], cpu_seconds: limits[3] },
            };
            let launch = Launch { policy, program: PathBuf::from("/bin/prog"), args: args.into_iter().map(OsString::from).collect() };
            let (back, init) = Launch::parse(launch.to_args()).unwrap();
            prop_assert_eq!(back, launch);
            prop_assert!(init.is_none());
        }
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let parse = |args: &[&str]| Launch::parse(args.iter().map(OsString::from)).unwrap_err();
        assert_eq!(parse(&["--read"]), "--read needs a value");
        assert_eq!(parse(&["--processes", "many", "--", "x"]), "--processes needs a number, not \"many\"");
        assert_eq!(parse(&["--read", "/x"]), "the server's command is missing (after --)");
        assert_eq!(parse(&["--"]), "the server's command is missing");
        assert_eq!(parse(&["--bogus", "1", "--", "x"]), "unknown argument --bogus \"1\"");
        let (launch, init) = Launch::parse(["--init", "user", "--", "/p", "a"].map(OsString::from)).unwrap();
        assert_eq!(init.as_deref(), Some("user"));
        assert_eq!((launch.program, launch.args), (PathBuf::from("/p"), vec![OsString::from("a")]));
    }
}
