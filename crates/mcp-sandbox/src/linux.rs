//! The Linux applier: no-new-privileges, user / network / PID namespaces, resource limits and a
//! Landlock ruleset, applied by the (single-threaded) launcher to itself before it runs the
//! server. Also the one-time probe of the kernel's Landlock ABI.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;

use crate::policy::{Limits, Policy, Presence, expand};
use crate::probe::list_dir;

/// The newest ABI whose rights this code asks for (best effort below it).
const ABI_USED: ABI = ABI::V7;

/// The kernel's Landlock ABI version, or `None` when it has no (enabled) Landlock.
///
/// Creates and drops a ruleset per version tried; restricts nothing.
pub(crate) fn landlock_abi() -> Option<u32> {
    const NEWEST_FIRST: [ABI; 7] = [ABI::V7, ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1];
    NEWEST_FIRST.into_iter().find_map(|abi| {
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(Ruleset::create);
        created.ok().map(|_| abi as u32)
    })
}

/// What went wrong before the server ran, and the launcher's exit status for it.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: i32,
    pub(crate) message: String,
}

/// Exit status of a launcher that could not set up the sandbox.
pub(crate) const SETUP_FAILED: i32 = 126;
/// Exit status of a launcher that could not run the server.
pub(crate) const EXEC_FAILED: i32 = 127;

pub(crate) fn setup(message: impl Into<String>) -> Failure {
    Failure { status: SETUP_FAILED, message: message.into() }
}

/// Which namespaces the first stage obtained.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Namespaces {
    /// A user namespace of its own: `RLIMIT_NPROC` counts this server's processes only.
    pub(crate) user: bool,
    /// A network namespace with nothing in it.
    pub(crate) net: bool,
    /// A PID namespace whose `pid_max` bounds the processes (root is exempt from `RLIMIT_NPROC`).
    pub(crate) pid: bool,
    /// The host runs as root (so does the server: its user namespace maps root to root).
    pub(crate) root: bool,
}

/// First stage, in the host's namespaces: no-new-privileges and the namespaces.
pub(crate) fn enter_namespaces(policy: &Policy) -> Result<Namespaces, Failure> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| setup(format!("cannot set no-new-privileges: {e}")))?;
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let root = uid.is_root();
    let want_net = !policy.network;
    let want_pid = root && policy.limits.processes.is_some();
    let mut flags = CloneFlags::CLONE_NEWUSER;
    flags.set(CloneFlags::CLONE_NEWNET, want_net);
    flags.set(CloneFlags::CLONE_NEWPID, want_pid);
    if nix::sched::unshare(flags).is_ok() {
        // Map only ourselves: the server keeps its files and gets no other identity.
        write_proc("/proc/self/setgroups", "deny")?;
        write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
        write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
        return Ok(Namespaces { user: true, net: want_net, pid: want_pid, root });
    }
    // No user namespaces here (disabled, or restricted by a security module). Root can still
    // have the others; anyone else falls back to Landlock alone.
    let mut rest = CloneFlags::empty();
    rest.set(CloneFlags::CLONE_NEWNET, want_net && root);
    rest.set(CloneFlags::CLONE_NEWPID, want_pid);
    if !rest.is_empty() {
        nix::sched::unshare(rest).map_err(|e| setup(format!("cannot create the server's namespaces: {e}")))?;
    }
    Ok(Namespaces { user: false, net: want_net && root, pid: want_pid, root })
}

fn write_proc(path: &str, text: &str) -> Result<(), Failure> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| setup(format!("cannot write {path} (for the user namespace): {e}")))
}

/// Inside the PID namespace, as its init: bounds the number of processes it can hold.
pub(crate) fn bound_pid_namespace(processes: u64) -> Result<(), Failure> {
    // PIDs run from 1 to pid_max - 1; the kernel refuses a pid_max below 301.
    let pid_max = processes.saturating_add(1).max(301);
    write_proc("/proc/sys/kernel/pid_max", &pid_max.to_string())
}

/// The resource limits. `RLIMIT_NPROC` only in a user namespace of our own, where it counts
/// this server's processes (outside one it would count all of the user's).
pub(crate) fn apply_limits(limits: &Limits, namespaces: Namespaces) -> Result<(), Failure> {
    let Limits { memory_mib, processes, open_files, cpu_seconds } = *limits;
    let set = |resource: Resource, name: &str, value: Option<u64>| -> Result<(), Failure> {
        let Some(value) = value else { return Ok(()) };
        let (_, hard) =
            nix::sys::resource::getrlimit(resource).map_err(|e| setup(format!("cannot read the {name} limit: {e}")))?;
        // Never above the host's hard limit: that cannot be raised, and is already stricter.
        let value = value.min(hard);
        nix::sys::resource::setrlimit(resource, value, value)
            .map_err(|e| setup(format!("cannot set the {name} limit to {value}: {e}")))
    };
    set(Resource::RLIMIT_AS, "address space", memory_mib.map(|m| m.saturating_mul(1024 * 1024)))?;
    set(Resource::RLIMIT_NOFILE, "open files", open_files)?;
    set(Resource::RLIMIT_CPU, "CPU time", cpu_seconds)?;
    if namespaces.user {
        set(Resource::RLIMIT_NPROC, "process", processes)?;
    }
    Ok(())
}

/// For root, a seccomp filter applied to this process (and so to what it runs) against what
/// would leave a privilege behind for other users: root's user namespace maps its root to the
/// real one, so a setuid or setgid file, or a file capability, made where others reach would
/// be theirs to use. Others' servers get no filter: such a file of theirs gives nothing.
///
/// - a mode with the setuid or setgid bit (`chmod` and its kin, opens that create, `mknod`):
///   EPERM (a setgid directory too: the filter cannot tell one from a file);
/// - extended attributes, which carry file capabilities and whose names a filter cannot read:
///   EOPNOTSUPP, which tools take as "none here" (`cp -p` sets modes without ACLs then);
/// - `openat2`, whose mode a filter cannot read, and io_uring, whose operations it never sees:
///   ENOSYS, and callers fall back to the plain calls (libuv does for io_uring).
///
/// On x86-64 each is also refused under its x32 number. Needs no-new-privileges (set when
/// the namespaces were entered).
pub(crate) fn apply_seccomp(namespaces: Namespaces) -> Result<(), Failure> {
    use std::collections::BTreeMap;

    use nix::libc;
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
    };
    if !namespaces.root {
        return Ok(());
    }
    let failed = |e: &dyn std::fmt::Display| setup(format!("cannot build the sandbox's system call filter: {e}"));
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| failed(&e))?;
    let has = |index: u8, bits: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bits), bits)
            .map_err(|e| failed(&e))
    };
    let privileged = [u64::from(libc::S_ISUID), u64::from(libc::S_ISGID)];
    // A rule per privileged bit: the mode argument at `index` has it.
    let mode_at = |index: u8| -> Result<Vec<SeccompRule>, Failure> {
        privileged.iter().map(|&bit| SeccompRule::new(vec![has(index, bit)?]).map_err(|e| failed(&e))).collect()
    };
    // For the opens, only when they create (otherwise the mode argument is not read).
    let creating_at = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, Failure> {
        let creating = [libc::O_CREAT, libc::O_TMPFILE].map(|f| u64::try_from(f).unwrap_or(0));
        let mut rules = Vec::new();
        for create in creating {
            for bit in privileged {
                rules.push(SeccompRule::new(vec![has(flags, create)?, has(mode, bit)?]).map_err(|e| failed(&e))?);
            }
        }
        Ok(rules)
    };
    let mut modes: Vec<(i64, Vec<SeccompRule>)> = vec![
        (libc::SYS_fchmod, mode_at(1)?),
        (libc::SYS_fchmodat, mode_at(2)?),
        // fchmodat2 (Linux 6.6): the same number on every architecture.
        (452, mode_at(2)?),
        (libc::SYS_openat, creating_at(2, 3)?),
        (libc::SYS_mknodat, mode_at(2)?),
    ];
    #[cfg(target_arch = "x86_64")]
    modes.extend([
        (libc::SYS_chmod, mode_at(1)?),
        (libc::SYS_open, creating_at(1, 2)?),
        (libc::SYS_creat, mode_at(1)?),
        (libc::SYS_mknod, mode_at(1)?),
    ]);
    // setxattrat (Linux 6.13): the same number on every architecture.
    let xattrs = [libc::SYS_setxattr, libc::SYS_lsetxattr, libc::SYS_fsetxattr, 463];
    let unseen = [libc::SYS_openat2, libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register];
    let errno = |e: i32| SeccompAction::Errno(u32::try_from(e).unwrap_or(1));
    let filters = [
        (modes, errno(libc::EPERM)),
        (xattrs.map(|n| (n, Vec::new())).into(), errno(libc::EOPNOTSUPP)),
        (unseen.map(|n| (n, Vec::new())).into(), errno(libc::ENOSYS)),
    ];
    for (rules, action) in filters {
        let mut by_number: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (number, rules) in rules {
            // x32 programs call the same system calls under these numbers.
            #[cfg(target_arch = "x86_64")]
            by_number.insert(number | 0x4000_0000, rules.clone());
            by_number.insert(number, rules);
        }
        let filter = SeccompFilter::new(by_number, SeccompAction::Allow, action, arch).map_err(|e| failed(&e))?;
        let program: seccompiler::BpfProgram = filter.try_into().map_err(|e| failed(&e))?;
        seccompiler::apply_filter(&program)
            .map_err(|e| setup(format!("cannot apply the sandbox's system call filter: {e}")))?;
    }
    Ok(())
}

/// The Landlock ruleset, applied to this process (and so to what it runs).
pub(crate) fn apply_landlock(policy: &Policy, namespaces: Namespaces) -> Result<(), Failure> {
    let landlock = |e: landlock::RulesetError| setup(format!("Landlock: {e}"));
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(ABI_USED)).map_err(landlock)?;
    if !policy.network && !namespaces.net {
        // No network namespace: TCP is all Landlock can deny, and it must.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI_USED))
            .map_err(|e| {
                setup(format!("no network namespace could be created and this kernel's Landlock cannot deny TCP: {e}"))
            })?
            .set_compatibility(CompatLevel::BestEffort);
    }
    // Signals and abstract UNIX sockets stay within the sandbox where the kernel supports it.
    ruleset = ruleset.scope(Scope::from_all(ABI_USED)).map_err(landlock)?;
    let mut created = ruleset.create().map_err(landlock)?;
    let protected = with_canonical(&policy.protected);
    for grant in &policy.grants {
        if grant.presence == Presence::Create {
            create_private_dir(&grant.path);
        }
        let path = match std::fs::canonicalize(&grant.path) {
            Ok(p) => p,
            Err(_) if grant.presence != Presence::Required => continue,
            Err(e) => return Err(setup(format!("sandbox path {}: {e}", grant.path.display()))),
        };
        if crate::policy::redirected_onto_protected(&grant.path, &path, &protected) {
            continue;
        }
        let access = if grant.write { AccessFs::from_all(ABI_USED) } else { AccessFs::from_read(ABI_USED) };
        for path in expand(&path, &protected, &mut list_dir) {
            let Some(rule) = rule(&path, access) else { continue };
            created = created.add_rule(rule).map_err(landlock)?;
        }
    }
    let status = created.restrict_self().map_err(landlock)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(setup("this kernel does not enforce Landlock, so the server cannot be confined"));
    }
    Ok(())
}

/// A rule for `path` (no longer there: none), with the rights a file can carry when it is one.
fn rule(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<std::fs::File>> {
    // O_PATH: a reference for the rule, not an open for reading (which could block on a FIFO);
    // O_NOFOLLOW: granted paths are resolved and expanded entries are never links.
    let flags = nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(path).ok()?;
    let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
    let access = if is_dir { access } else { access & AccessFs::from_file(ABI_USED) };
    Some(PathBeneath::new(file, access))
}

/// The protected paths as given and as resolved (a link to a protected directory must not be
/// a way around it, nor a protected path reached through a linked HOME).
fn with_canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths.to_vec();
    out.extend(paths.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
    out.sort();
    out.dedup();
    out
}

/// Makes `dir` (mode 0700) when it is missing and what is missing lies in a folder of our own
/// user's (HOME, say; never `/`, nor another user's). Best effort: a cache that cannot be
/// made is not granted, and the server's own error says what it missed.
fn create_private_dir(dir: &Path) {
    if dir.exists() {
        return;
    }
    let uid = nix::unistd::getuid().as_raw();
    let Some(existing) = dir.ancestors().skip(1).find(|a| a.exists()) else { return };
    let own = std::fs::metadata(existing).is_ok_and(|m| m.is_dir() && m.uid() == uid);
    if existing.parent().is_none() || !own {
        return;
    }
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
}

/// Points this process's stdin, stdout and stderr at `/dev/null` once it has started the next
/// process: a launcher that waits must not hold the server's pipes open, or the host would not
/// see the server close its stdout until the server exits.
pub(crate) fn release_stdio() {
    let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") else { return };
    let _ = nix::unistd::dup2_stdin(&null);
    let _ = nix::unistd::dup2_stdout(&null);
    let _ = nix::unistd::dup2_stderr(&null);
}
