//! `doctor`: what the host gives each layer, and whether the runner can run jobs here.

use crate::assets;
use crate::config::Config;
use crate::engine::Engine;
use crate::job::Net;
use crate::runtime;
use crate::sandbox::cgroup::CgroupHost;
use crate::sandbox::{fixes, seccomp, Layers, TimeNamespace};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct Check {
    layer: String,
    ok: bool,
    detail: String,
    /// What to change on the host when `ok` is false.
    fix: Option<String>,
}

fn check(layer: &str, ok: bool, detail: String, fix: Option<String>) -> Check {
    Check {
        layer: layer.to_string(),
        ok,
        detail,
        fix: if ok { None } else { fix },
    }
}

fn checks(config: &Config) -> Vec<Check> {
    let mut l = Layers::probe();
    l.pretend_missing(&config.runner.pretend_missing);
    let mut out = vec![
        check("kernel", true, l.kernel.clone(), None),
        check(
            "root",
            l.root,
            if l.root {
                "running as root"
            } else {
                "not root"
            }
            .into(),
            Some(fixes::ROOT.into()),
        ),
    ];
    for (ns, ok) in &l.namespaces {
        out.push(check(
            &format!("namespace {ns}"),
            *ok,
            if *ok { "present" } else { "missing" }.into(),
            Some(fixes::namespace(ns)),
        ));
    }
    out.push(check(
        "user namespace",
        true,
        "not used: the runner is root and gives each job an unprivileged uid of its own".into(),
        None,
    ));
    out.push(check(
        "landlock",
        l.landlock_abi >= 1,
        format!(
            "ABI {} ({})",
            l.landlock_abi,
            crate::plan::ruleset::features(l.landlock_abi).join(", ")
        ),
        Some(fixes::LANDLOCK.into()),
    ));
    out.push(check(
        "seccomp",
        l.seccomp,
        if l.seccomp {
            "filter mode available"
        } else {
            "unavailable"
        }
        .into(),
        Some(fixes::SECCOMP.into()),
    ));
    out.push(check(
        "exec gate",
        l.exec_gate,
        match &l.exec_gate_problem {
            None => "seccomp user notification with CONTINUE: only the init's exec of Node runs, every later exec is refused".into(),
            Some(e) => e.clone(),
        },
        Some(fixes::EXEC_GATE.into()),
    ));
    // Not required (a fingerprint, not a boundary): always ok, saying what jobs get.
    out.push(check(
        "time namespace",
        true,
        match l.time_namespace {
            TimeNamespace::Own => "yes: each job's monotonic and boot clocks start near zero".into(),
            TimeNamespace::InUserNamespace => "yes, owned by a user namespace (the runner lacks CAP_SYS_TIME, as under systemd's ProtectClock=): each job's monotonic and boot clocks start near zero".into(),
            TimeNamespace::None => "no (the kernel has none, or the runner lacks CAP_SYS_TIME and cannot make a user namespace to own one): jobs read the host's uptime from their monotonic clock".into(),
        },
        None,
    ));
    out.push(files_check(config));
    out.push(init_check());
    let policy = assets::seccomp_policy(config).and_then(|file| {
        let text = file.text()?;
        let p = seccomp::parse_policy(text).map_err(|e| format!("{}: {e}", file.source))?;
        for net in [Net::Deny, Net::OpenvibeOnly, Net::Public] {
            seccomp::compile(&p, net).map_err(|e| format!("{}: {e}", file.source))?;
        }
        Ok(file.source)
    });
    out.push(check(
        "seccomp policy",
        policy.is_ok(),
        match &policy {
            Ok(source) => format!("{source}: compiles for every net mode"),
            Err(e) => e.clone(),
        },
        Some(format!(
            "fix or remove the override in {} (or runner.policies_dir) to use the built-in policy",
            assets::ETC_POLICIES
        )),
    ));
    out.push(core_dump_check(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").map_err(|e| e.to_string()),
    ));
    out.push(coredump_filter_check(std::path::Path::new(
        "/proc/self/coredump_filter",
    )));
    out.push(egress_check(config));
    match CgroupHost::detect(crate::sandbox::cgroup_parent(config).as_deref()) {
        Ok(h) => match h.swap_problem() {
            Some(e) => out.push(check("cgroups", false, e.to_string(), Some(e.fix()))),
            None => {
                let detail = h
                    .describe()
                    .into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                let detail = match h.version() {
                    crate::sandbox::cgroup::CgroupVersion::V2 => format!(
                        "{detail}; job join: {}",
                        crate::sandbox::cgroup::v2_join(crate::sandbox::cgroup::clone3_refused())
                    ),
                    crate::sandbox::cgroup::CgroupVersion::V1 => detail,
                };
                out.push(check("cgroups", true, detail, None));
            }
        },
        Err(e) => out.push(check("cgroups", false, e.to_string(), Some(e.fix()))),
    }
    let node = runtime::locate(config.runner.node.as_deref());
    match runtime::inspect(&node, config.runner.allow_node20, None) {
        Ok(rt) => out.push(check(
            "node",
            true,
            format!(
                "{} {} ({}; flags {} --allow-fs-read --disallow-code-generation-from-strings){}",
                rt.node.display(),
                rt.version,
                if rt.pinned {
                    "the pinned binary"
                } else {
                    "not the pinned binary"
                },
                rt.permission_flag(),
                rt.hardening_gap()
                    .map(|gap| format!("; warning: {gap}"))
                    .unwrap_or_default()
            ),
            None,
        )),
        Err(e) => out.push(check(
            "node",
            false,
            e.to_string(),
            Some("run scripts/install-node, or set runner.node".into()),
        )),
    }
    out
}

/// Which executable each job's init stage starts from (`sandbox::init_exe`).
fn init_check() -> Check {
    match crate::sandbox::init_exe::InitExe::locate() {
        Ok(init) => check("init stage", true, init.describe(), None),
        Err(e) => check(
            "init stage",
            false,
            e,
            Some("reinstall the runner (its init executable is root's, mode 755, in a folder only root may write)".into()),
        ),
    }
}

/// Which of the runner's own files are used: built in, or an override.
fn files_check(config: &Config) -> Check {
    let found = [
        assets::seccomp_policy(config),
        assets::egress_policy(config),
        assets::preload(config),
    ];
    let problems: Vec<String> = found.iter().filter_map(|f| f.clone().err()).collect();
    let detail = found
        .iter()
        .filter_map(|f| f.as_ref().ok())
        .map(|a| format!("{}: {}", a.name, a.source))
        .collect::<Vec<_>>()
        .join("; ");
    if problems.is_empty() {
        check("runner files", true, detail, None)
    } else {
        check(
            "runner files",
            false,
            problems.join("; "),
            Some(format!(
                "overrides live in {} and {} (or the configured runner.policies_dir and runner.runtime_dir); remove one to use the built-in file",
                assets::ETC_POLICIES,
                assets::ETC_RUNTIME
            )),
        )
    }
}

/// Where the host sends a crashing process's memory (`kernel.core_pattern`, read, never
/// written), and why no job's memory goes there.
fn core_dump_check(pattern: Result<String, String>) -> Check {
    let pattern = match pattern {
        Ok(p) => p.trim_end().to_string(),
        Err(e) => {
            return check(
                "core dumps",
                true,
                format!(
                    "core_pattern unreadable ({e}); jobs run with RLIMIT_CORE 1, which stops \
                     core files and pipe helpers alike"
                ),
                None,
            )
        }
    };
    let shown = format!("{pattern:?}");
    let detail = if let Some(helper) = pattern.strip_prefix('|') {
        format!(
            "core_pattern {shown} pipes cores to a helper ({}) that runs as root; jobs run with \
             RLIMIT_CORE 1, the value the kernel reads as \"no dump, not even to a pipe\", and \
             seccomp keeps them from changing it",
            helper.split_whitespace().next().unwrap_or("")
        )
    } else if pattern.starts_with('@') {
        format!(
            "core_pattern {shown} sends cores to a socket, which the kernel does whatever the \
             core limit; jobs run with a coredump_filter of 0, so a core holds none of their \
             memory (and systemd-coredump skips processes whose core limit is below a page)"
        )
    } else {
        format!(
            "core_pattern {shown} writes core files; jobs run with RLIMIT_CORE 1, below any core \
             file's size, and on a read-only root"
        )
    };
    check("core dumps", true, detail, None)
}

/// Whether this process may set its own `coredump_filter`, as every job's init stage does
/// (to 0, so that a core holds none of a job's memory; a job whose write fails does not
/// run). The value read is written back, so nothing changes: in hexadecimal with its `0x`,
/// since the kernel reads the file's zero-padded form as octal.
fn coredump_filter_check(path: &std::path::Path) -> Check {
    let tried = std::fs::read_to_string(path)
        .and_then(|value| std::fs::write(path, format!("0x{}", value.trim())));
    match tried {
        Ok(()) => check(
            "core filter",
            true,
            "each job's processes are given a coredump_filter of 0".into(),
            None,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => check(
            "core filter",
            true,
            "no coredump_filter: this kernel writes no ELF core dumps".into(),
            None,
        ),
        Err(e) => check(
            "core filter",
            false,
            format!(
                "cannot write {}: {e}; every job would fail at its setup, which sets it to 0 so \
                 that a core of a job holds none of its memory",
                path.display()
            ),
            Some(
                "run the runner with a writable /proc (not a container's read-only one, and no \
                 security profile that denies writes to /proc/<pid>/coredump_filter)"
                    .into(),
            ),
        ),
    }
}

/// The egress policy, a job network namespace with local routes, and the upstream DNS
/// servers: what `openvibe-only` and `public` jobs need.
fn egress_check(config: &Config) -> Check {
    let fix = Some(format!(
        "fix or remove the override in {} (or runner.policies_dir) to use the built-in policy; network namespaces need CONFIG_NET_NS and root; set runner.dns_servers if /etc/resolv.conf names no server",
        assets::ETC_POLICIES
    ));
    let loaded = assets::egress_policy(config).and_then(|file| {
        let text = file.text()?;
        crate::egress::policy::EgressPolicy::from_toml_str(text)
            .map(|p| (p, file.source.clone()))
            .map_err(|e| format!("{}: {e}", file.source))
    });
    let (policy, source) = match loaded {
        Ok(p) => p,
        Err(e) => return check("egress", false, e, fix),
    };
    if let Err(e) = crate::sandbox::netns::create() {
        return check(
            "egress",
            false,
            format!("a job network namespace: {e}"),
            fix,
        );
    }
    let egress = crate::egress::proxy::Egress::new(policy, &config.runner.dns_servers);
    if let Some(problem) = egress.problem() {
        return check("egress", false, problem, fix);
    }
    let upstream = if config.runner.dns_servers.is_empty() {
        "the host's /etc/resolv.conf".to_string()
    } else {
        config
            .runner
            .dns_servers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    check(
        "egress",
        true,
        format!(
            "{source}: openvibe-only allows {}; names resolved with {upstream}",
            egress.policy().allow.join(", ")
        ),
        None,
    )
}

/// Prints the checks; exit 0 only when the engine starts.
pub fn run(config: Config, json: bool) -> ExitCode {
    let list = checks(&config);
    let engine = Engine::start(config);
    let failed = list.iter().filter(|c| !c.ok).count();
    // A failed check fails doctor even when the engine then started (a placement that
    // succeeded only at the second try is still a problem to look at).
    let can_run = engine.is_ok() && failed == 0;
    use std::fmt::Write as _;
    let mut text = String::new();
    if json {
        let v = serde_json::json!({
            "can_run_jobs": can_run,
            "problem": match &engine {
                Err(e) => Some(e.to_string()),
                Ok(_) if failed > 0 => Some(format!("{failed} check(s) failed")),
                Ok(_) => None,
            },
            "checks": list,
        });
        let _ = writeln!(text, "{v}");
    } else {
        for c in &list {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            let _ = writeln!(text, "{mark} {:<18} {}", c.layer, c.detail);
            if let Some(f) = &c.fix {
                let _ = writeln!(text, "     {:<18} fix: {f}", "");
            }
        }
        let _ = match &engine {
            Ok(_) if failed == 0 => writeln!(text, "\nThis host can run jobs."),
            Ok(_) => writeln!(
                text,
                "\nThis host cannot be trusted to run jobs: {failed} check(s) above failed"
            ),
            Err(e) => writeln!(text, "\nThis host cannot run jobs: {e}"),
        };
    }
    let written = crate::cli::write_stdout(&text);
    if written != ExitCode::SUCCESS {
        return written;
    }
    if can_run {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_filter_is_written_back_unchanged_and_a_failed_write_is_a_problem() {
        // This process's own: the check changes nothing (the kernel's zero-padded form,
        // written back without its `0x`, would be read as octal).
        let own = std::path::Path::new("/proc/self/coredump_filter");
        let before = std::fs::read_to_string(own).unwrap();
        let c = coredump_filter_check(own);
        assert!(c.ok, "{}", c.detail);
        assert_eq!(std::fs::read_to_string(own).unwrap(), before);

        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("coredump_filter");
        std::fs::write(&file, "00000033\n").unwrap();
        assert!(coredump_filter_check(&file).ok);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0x00000033");

        let c = coredump_filter_check(&tmp.path().join("missing"));
        assert!(c.ok && c.detail.contains("no ELF core"), "{}", c.detail);

        // A directory in its place cannot be written, as a read-only /proc's file cannot.
        let c = coredump_filter_check(tmp.path());
        assert!(!c.ok, "{}", c.detail);
        assert!(
            c.detail.contains("every job would fail")
                && c.fix
                    .as_deref()
                    .is_some_and(|f| f.contains("writable /proc")),
            "{} {:?}",
            c.detail,
            c.fix
        );
    }

    #[test]
    fn the_core_pattern_is_reported_with_what_it_means() {
        let c = core_dump_check(Ok("|/usr/lib/systemd/systemd-coredump %P %u %g\n".into()));
        assert!(c.ok);
        assert!(
            c.detail
                .contains("\"|/usr/lib/systemd/systemd-coredump %P %u %g\"")
                && c.detail.contains("/usr/lib/systemd/systemd-coredump)")
                && c.detail.contains("RLIMIT_CORE 1")
                && c.detail.contains("not even to a pipe"),
            "{}",
            c.detail
        );
        let c = core_dump_check(Ok("core\n".into()));
        assert!(
            c.detail.contains("\"core\" writes core files"),
            "{}",
            c.detail
        );
        let c = core_dump_check(Ok("@@/run/systemd/coredump".into()));
        assert!(c.detail.contains("socket"), "{}", c.detail);
        let c = core_dump_check(Err("permission denied".into()));
        assert!(
            c.detail.contains("unreadable (permission denied)"),
            "{}",
            c.detail
        );
    }
}
