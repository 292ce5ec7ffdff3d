'use strict';
// HOSTILE (do not run outside the sandbox). Under net "deny" the job's network namespace
// reaches nothing. Node 24's permission model does not guard the network at all, so
// every attempt below really reaches the kernel: only the OS sandbox stops it.
//
// Targets come from the input so the test harness can choose them:
//   local_port  a TCP port on the host's loopback (default 22). A harness that listens on
//               127.0.0.1:<port> itself and passes the port makes the loopback probe prove
//               something even on hosts without an sshd.
//   public_ip   a non-loopback address (default 192.0.2.1, TEST-NET-1 of RFC 5737: reserved
//               for documentation, never assigned to anyone, so even a broken sandbox sends
//               nothing to a real third party). Used for TCP :443, UDP :53 and fetch http.
//   dns_name    a name to resolve (default example.com, reserved by IANA).
//   host_ip     one of the host's own addresses (the harness listens on every address at
//               local_port and udp_port); absent: not tried.
//   udp_port    a UDP port the harness listens on (loopback and host_ip); absent: not tried.
//   abstract_name  an abstract unix socket name the harness listens on; absent: not tried.
//
// Every probe gives up after 2 s, all run at once, the whole tool ends within ~3 s.
// stdout: which probes succeeded (expected: none, all false). stderr: the error code
// each one failed with, for the person reading the result; codes differ by sandbox
// design (ENETUNREACH, ECONNREFUSED, EAI_AGAIN, EACCES, ENOENT...), so they are not
// part of the exact expected output.
const net = require('net');
const dgram = require('dgram');
const dns = require('dns');

const TIMEOUT_MS = 2000;

function withTimeout(promise) {
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ ok: false, code: 'TIMEOUT' }), TIMEOUT_MS + 200); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function failure(e) {
  return { ok: false, code: e?.cause?.code ?? e?.code ?? e?.name ?? String(e) };
}

function tcp(options) {
  return withTimeout(new Promise((resolve) => {
    let socket;
    try {
      socket = net.connect({ ...options, timeout: TIMEOUT_MS });
    } catch (e) {
      resolve(failure(e));
      return;
    }
    socket.once('connect', () => { socket.destroy(); resolve({ ok: true }); });
    socket.once('timeout', () => { socket.destroy(); resolve({ ok: false, code: 'TIMEOUT' }); });
    socket.once('error', (e) => { socket.destroy(); resolve(failure(e)); });
  }));
}

function udp(host, port) {
  return withTimeout(new Promise((resolve) => {
    let socket;
    try {
      socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    } catch (e) {
      resolve(failure(e));
      return;
    }
    const finish = (r) => { try { socket.close(); } catch { /* closed */ } resolve(r); };
    socket.once('error', (e) => finish(failure(e)));
    socket.send(Buffer.from('openvibe-net-deny-probe'), port, host, (e) => finish(e ? failure(e) : { ok: true }));
  }));
}

function lookup(name) {
  return withTimeout(new Promise((resolve) => {
    dns.lookup(name, (e) => resolve(e ? failure(e) : { ok: true }));
  }));
}

function resolver(name) {
  return withTimeout(dns.promises.resolve4(name).then(() => ({ ok: true }), failure));
}

function httpFetch(url) {
  return withTimeout(fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'manual' })
    .then(() => ({ ok: true }), failure));
}

async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  return text === '' ? {} : JSON.parse(text);
}

async function main() {
  const input = await readInput();
  const localPort = Number.isInteger(input.local_port) ? input.local_port : 22;
  const publicIp = typeof input.public_ip === 'string' && net.isIP(input.public_ip) ? input.public_ip : '192.0.2.1';
  const dnsName = typeof input.dns_name === 'string' ? input.dns_name : 'example.com';
  const urlHost = net.isIPv6(publicIp) ? `[${publicIp}]` : publicIp;
  const hostIp = typeof input.host_ip === 'string' && net.isIP(input.host_ip) ? input.host_ip : null;
  const udpPort = Number.isInteger(input.udp_port) ? input.udp_port : null;
  const abstractName = typeof input.abstract_name === 'string' ? input.abstract_name : null;

  const probes = {
    tcp_local: tcp({ host: '127.0.0.1', port: localPort }),
    tcp6_local: tcp({ host: '::1', port: localPort }),
    tcp_public: tcp({ host: publicIp, port: 443 }),
    udp_public: udp(publicIp, 53),
    dns_lookup: lookup(dnsName),
    dns_resolve: resolver(dnsName),
    fetch_http: httpFetch(`http://${urlHost}/`),
    unix_runner_socket: tcp({ path: '/run/openvibe-link/skill-runner.sock' }),
  };
  if (hostIp !== null) probes.tcp_host = tcp({ host: hostIp, port: localPort });
  if (udpPort !== null) probes.udp_local = udp('127.0.0.1', udpPort);
  if (udpPort !== null && hostIp !== null) probes.udp_host = udp(hostIp, udpPort);
  if (abstractName !== null) probes.abstract_host = tcp({ path: `\0${abstractName}` });
  const names = Object.keys(probes);
  const results = await Promise.all(Object.values(probes));
  const report = {};
  const codes = {};
  names.forEach((name, i) => { report[name] = results[i].ok; codes[name] = results[i].code ?? null; });
  process.stderr.write(`net-deny error codes: ${JSON.stringify(codes)}\n`);
  process.stdout.write(JSON.stringify(report));
  process.exit(0); // do not wait for handles a hung probe may leave behind
}

main();
