//! Egress for jobs whose `net` is `openvibe-only` or `public` (SPEC.md, "Egress per net";
//! issue 4): the building blocks, all pure or self-contained, that the sandbox's DNS responder
//! and proxy are made of.
//!
//! - [`policy`]: `policies/egress.toml` — the allow list, the ports, the denied address ranges —
//!   and the checks on names, IP literals and addresses.
//! - [`dns`]: the job's DNS responder (query bytes in, answer bytes out): allowed names as the
//!   runner's own lookup found them (a synthetic address, NXDOMAIN, SERVFAIL, no data),
//!   NXDOMAIN for the rest, no query forwarded; the [`dns::NameTable`].
//! - [`sniff`]: the TLS server name or HTTP Host from a connection's first bytes.
//! - [`decide`]: allow (to exactly which address) or refuse one accepted connection.
//! - [`record`]: the result's `egress` list and the job's byte and time budgets.
//! - [`http`]: port 80 served request by request (hyper), each request judged.
//! - [`proxy`]: the effects: one job's namespace served by the DNS responder and the proxy
//!   (its listeners and the responder's transports in proxy/listen.rs).
//! - [`host_networks`]: the Link's own addresses, which no job may reach.
//! - [`nat64`]: the NAT64 prefixes of the Link's network (RFC 7050), judged as embedded IPv4.

pub mod decide;
pub mod dns;
pub mod host_networks;
pub mod http;
pub mod nat64;
pub mod policy;
pub mod proxy;
pub mod record;
pub mod resolver;
pub mod sniff;
