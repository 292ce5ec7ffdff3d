'use strict';
// HOSTILE (do not run outside the sandbox). Under net "deny" every socket to anywhere must
// fail. net-deny covers the plain cases; this tool tries the spellings and side doors:
// loopback as ::1, 0.0.0.0, ::, ::ffff:127.0.0.1, 127.1, 2130706433 and 0x7f000001 (glibc
// parses the last three as 127.0.0.1 without any DNS), UDP over IPv6, DNS with servers set
// by the tool, http with a localAddress, TLS with an SNI, fetch, unix sockets at the usual
// host paths, abstract unix sockets, and listening (TCP, UDP, unix, abstract).
//
// Targets come from the input (documentation ranges only: 192.0.2.0/24, 2001:db8::/32, so
// even a broken sandbox sends nothing to a real third party). Every probe gives up after
// 2 s. The report keeps the error code of each attempt because the code says which layer
// refused: EPERM is the seccomp policy refusing an inet socket under deny; ENOENT a socket
// path absent from the job's root; ECONNREFUSED an abstract name nobody listens on in the
// job's own network namespace (c-ares also reports its own failed socket so); EROFS the
// read-only /skill; EAI_AGAIN a name with no resolver.
const net = require('net');
const dgram = require('dgram');
const dns = require('dns');
const http = require('http');
const https = require('https');
const tls = require('tls');
const fs = require('fs');

const TIMEOUT_MS = 2000;

function failure(e) {
  return { ok: false, code: e?.cause?.code ?? e?.code ?? e?.name ?? String(e) };
}

function withTimeout(promise) {
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ ok: false, code: 'TIMEOUT' }), TIMEOUT_MS + 300); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function tcp(options) {
  return withTimeout(new Promise((resolve) => {
    let s;
    try { s = net.connect({ ...options, timeout: TIMEOUT_MS }); } catch (e) { resolve(failure(e)); return; }
    s.once('connect', () => { s.destroy(); resolve({ ok: true }); });
    s.once('timeout', () => { s.destroy(); resolve({ ok: false, code: 'TIMEOUT' }); });
    s.once('error', (e) => { s.destroy(); resolve(failure(e)); });
  }));
}

function udpSend(type, host, port) {
  return withTimeout(new Promise((resolve) => {
    let s;
    try { s = dgram.createSocket(type); } catch (e) { resolve(failure(e)); return; }
    const finish = (r) => { try { s.close(); } catch { /* closed */ } resolve(r); };
    s.once('error', (e) => finish(failure(e)));
    s.send(Buffer.from('openvibe-net-deny-probe'), port, host, (e) => finish(e ? failure(e) : { ok: true }));
  }));
}

function udpBind(type) {
  return withTimeout(new Promise((resolve) => {
    let s;
    try { s = dgram.createSocket(type); } catch (e) { resolve(failure(e)); return; }
    const finish = (r) => { try { s.close(); } catch { /* closed */ } resolve(r); };
    s.once('error', (e) => finish(failure(e)));
    s.bind(0, () => finish({ ok: true }));
  }));
}

function listen(arg) {
  return withTimeout(new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (e) => resolve(failure(e)));
    try {
      server.listen(arg, () => { server.close(); resolve({ ok: true }); });
    } catch (e) {
      resolve(failure(e));
    }
  }));
}

function resolveWith(servers, name) {
  const resolver = new dns.promises.Resolver({ timeout: 500, tries: 1 });
  try { resolver.setServers(servers); } catch (e) { return Promise.resolve(failure(e)); }
  return withTimeout(resolver.resolve4(name).then(() => ({ ok: true }), failure));
}

function httpGet(mod, options) {
  return withTimeout(new Promise((resolve) => {
    let req;
    try {
      req = mod.get({ ...options, timeout: TIMEOUT_MS }, (res) => { res.destroy(); resolve({ ok: true }); });
    } catch (e) { resolve(failure(e)); return; }
    req.once('error', (e) => resolve(failure(e)));
    req.once('timeout', () => { req.destroy(); resolve({ ok: false, code: 'TIMEOUT' }); });
  }));
}

function tlsConnect(options) {
  return withTimeout(new Promise((resolve) => {
    let s;
    try { s = tls.connect({ ...options, timeout: TIMEOUT_MS }); } catch (e) { resolve(failure(e)); return; }
    s.once('secureConnect', () => { s.destroy(); resolve({ ok: true }); });
    s.once('error', (e) => { s.destroy(); resolve(failure(e)); });
  }));
}

function fetchUrl(url) {
  return withTimeout(fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'manual' }).then(() => ({ ok: true }), failure));
}

function groups(input) {
  const port = Number.isInteger(input.port) ? input.port : 80;
  const v4 = typeof input.doc_ipv4 === 'string' && net.isIPv4(input.doc_ipv4) ? input.doc_ipv4 : '192.0.2.1';
  const v6 = typeof input.doc_ipv6 === 'string' && net.isIPv6(input.doc_ipv6) ? input.doc_ipv6 : '2001:db8::1';
  const sni = typeof input.sni === 'string' ? input.sni : 'openvibe.services';
  const abstract = typeof input.abstract_name === 'string' ? input.abstract_name : 'openvibe-net-deny-probe';
  return {
    loopback_spellings: () => ({
      ipv6_loopback: tcp({ host: '::1', port }),
      ipv4_any: tcp({ host: '0.0.0.0', port }),
      ipv6_any: tcp({ host: '::', port }),
      ipv4_mapped_ipv6: tcp({ host: '::ffff:127.0.0.1', port }),
      short_form_127_1: tcp({ host: '127.1', port }),
      decimal_2130706433: tcp({ host: '2130706433', port }),
      hex_0x7f000001: tcp({ host: '0x7f000001', port }),
      localhost_name: tcp({ host: 'localhost', port }),
    }),
    udp_and_dns: () => ({
      udp6_send_doc: udpSend('udp6', v6, 53),
      udp4_send_loopback: udpSend('udp4', '127.0.0.1', 53),
      udp4_bind_any_port: udpBind('udp4'),
      udp6_bind_any_port: udpBind('udp6'),
      dns_server_loopback: resolveWith(['127.0.0.1'], sni),
      dns_server_doc_ipv4: resolveWith([`${v4}`], sni),
      dns_server_doc_ipv6: resolveWith([`[${v6}]:53`], sni),
    }),
    http_tls_fetch: () => ({
      http_with_local_address: httpGet(http, { host: v4, port, localAddress: '127.0.0.1' }),
      http_ipv6_loopback: httpGet(http, { host: '::1', port }),
      https_doc_ipv4: httpGet(https, { host: v4, port: 443, servername: sni }),
      tls_with_sni: tlsConnect({ host: v4, port: 443, servername: sni }),
      tls_doc_ipv6: tlsConnect({ host: v6, port: 443, servername: sni }),
      fetch_ipv6_loopback: fetchUrl(`http://[::1]:${port}/`),
      fetch_https_doc_ipv4: fetchUrl(`https://${v4}/`),
    }),
    unix_sockets: () => ({
      systemd_journal: tcp({ path: '/run/systemd/journal/stdout' }),
      docker: tcp({ path: '/var/run/docker.sock' }),
      dbus_system: tcp({ path: '/run/dbus/system_bus_socket' }),
      runner_socket: tcp({ path: '/run/openvibe-link/skill-runner.sock' }),
      abstract_input_name: tcp({ path: `\0${abstract}` }),
      abstract_x11: tcp({ path: '\0/tmp/.X11-unix/X0' }),
    }),
    listen: () => ({
      tcp_any_port: listen(0),
      tcp_loopback_v4: listen({ host: '127.0.0.1', port: 0 }),
      tcp_any_v6: listen({ host: '::', port: 0 }),
      unix_in_skill: listen('/skill/openvibe-listen-probe.sock'),
      unix_abstract: listen(`\0${abstract}-listen`),
      udp4_bind: udpBind('udp4'),
    }),
  };
}

async function main() {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const group = groups(input)[input.group];
  if (!group) throw new Error(`unknown group ${input.group}`);
  const probes = group();
  const names = Object.keys(probes);
  const results = await Promise.all(Object.values(probes));
  const report = {};
  names.forEach((name, i) => { report[name] = results[i]; });
  process.stdout.write(JSON.stringify(report));
  process.exit(0); // do not wait for handles a hung probe may leave behind
}

main();
