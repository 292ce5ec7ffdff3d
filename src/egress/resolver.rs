//! The upstream resolver the proxy asks for a job's names: `runner.dns_servers` as given,
//! else the servers of the host's resolv.conf, read again at each job's start and rebuilt
//! when the file's bytes changed. It keeps no answers (`cache_size` 0): it is shared by every
//! job, and each job keeps its own.

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The host's resolver configuration (a host path), used when `runner.dns_servers` is
/// empty. Not the job's own resolv.conf, which is `plan::JOB_RESOLV_CONF_TEXT`.
pub const HOST_RESOLV_CONF: &str = "/etc/resolv.conf";

/// A resolver, or why there is none.
pub type Built = Result<Arc<TokioResolver>, String>;

/// Where the proxy's resolver comes from.
pub enum Upstream {
    /// `runner.dns_servers`: built once.
    Fixed(Built),
    /// The host's resolv.conf: read at each job's start and rebuilt when its bytes changed
    /// (a Link's DNS servers may change while the daemon runs: DHCP, a VPN).
    System {
        path: PathBuf,
        last: Mutex<(Option<Vec<u8>>, Built)>,
    },
}

impl Upstream {
    /// The servers of `runner.dns_servers`.
    pub fn fixed(dns_servers: &[SocketAddr]) -> Upstream {
        Upstream::Fixed(fixed_resolver(dns_servers).map(Arc::new))
    }

    /// The servers of the resolv.conf at `path`, read when first asked for.
    pub fn system(path: &Path) -> Upstream {
        Upstream::System {
            path: path.to_path_buf(),
            last: Mutex::new((None, Err("not read yet".into()))),
        }
    }

    /// The resolver for a job starting now.
    pub fn current(&self) -> Built {
        match self {
            Upstream::Fixed(built) => built.clone(),
            Upstream::System { path, last } => {
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                match std::fs::read(path) {
                    Err(e) => {
                        *last = (
                            None,
                            Err(format!(
                                "the host's DNS configuration {} cannot be read: {e}; set runner.dns_servers",
                                path.display()
                            )),
                        );
                    }
                    Ok(text) => {
                        if last.0.as_deref() != Some(text.as_slice()) {
                            let built = system_resolver(path, &text).map(Arc::new);
                            if built.is_ok() && last.0.is_some() {
                                tracing::info!(path = %path.display(), "DNS configuration changed; egress uses its new servers");
                            }
                            *last = (Some(text), built);
                        }
                    }
                }
                last.1.clone()
            }
        }
    }
}

fn fixed_resolver(dns_servers: &[SocketAddr]) -> Result<TokioResolver, String> {
    let mut servers = Vec::new();
    for addr in dns_servers {
        let mut udp = ConnectionConfig::udp();
        udp.port = addr.port();
        let mut tcp = ConnectionConfig::tcp();
        tcp.port = addr.port();
        servers.push(NameServerConfig::new(addr.ip(), true, vec![udp, tcp]));
    }
    finish_resolver(ResolverConfig::from_name_servers(servers))
}

fn system_resolver(path: &Path, text: &[u8]) -> Result<TokioResolver, String> {
    let (config, _) = hickory_resolver::system_conf::parse_resolv_conf(text).map_err(|e| {
        format!(
            "the host's DNS configuration {} cannot be used: {e}; set runner.dns_servers",
            path.display()
        )
    })?;
    if config.name_servers().is_empty() {
        return Err(format!(
            "the host's DNS configuration {} names no server; set runner.dns_servers",
            path.display()
        ));
    }
    // Only its servers: no search domains (names are asked fully qualified anyway).
    finish_resolver(ResolverConfig::from_name_servers(
        config.name_servers().to_vec(),
    ))
}

fn finish_resolver(config: ResolverConfig) -> Result<TokioResolver, String> {
    let mut builder = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
    let opts = builder.options_mut();
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    opts.use_hosts_file = ResolveHosts::Never;
    opts.timeout = Duration::from_secs(2);
    opts.attempts = 2;
    opts.ndots = 0;
    // No cache: this resolver serves every job, so a cached answer would let one job time a
    // lookup to learn whether another looked the same name up lately. Each job keeps what
    // it was answered itself (the proxy's per-job names), which is all the caching it needs.
    opts.cache_size = 0;
    builder
        .build()
        .map_err(|e| format!("cannot set up the upstream DNS resolver: {e}"))
}

#[cfg(test)]
mod tests;
