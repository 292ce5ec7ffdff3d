'use strict';
// HOSTILE (do not run outside the sandbox): every way out that is not HTTP(S) through a name.
//   udp: datagrams to the public test hosts, the Link's LAN, metadata, loopback, the Link's
//        own addresses, a public resolver, broadcast, multicast and IPv6 targets; to port 53
//        a DNS query for `probe_name`, elsewhere a few bytes; each waits for one reply;
//   tcp: connections to ports other than 80/443 (ssh, smtp, proxies, DoT) on the same hosts;
//   dns: the tool's own DNS servers, over UDP (c-ares with setServers) and over TCP;
//   icmp: Node has no ICMP socket (raw sockets are for the native probe); asking for one is
//        reported, so the record shows the attempt was made.
// Input: { probe_name, timeout_ms }. Output: { udp: [...], tcp: [...], dns: [...], icmp }.
const dns = require('node:dns');
const dgram = require('node:dgram');
const { readInput, udp, tcpConnect, dnsTcp, dnsQuery, code, out } = require('./lib.js');

const UDP = [
  ['203.0.113.10', 9], ['203.0.113.10', 53], ['203.0.113.10', 123], ['203.0.113.10', 443],
  ['203.0.113.10', 9999], ['203.0.113.53', 53], ['203.0.113.53', 5353],
  ['10.77.0.2', 53], ['10.77.0.2', 123], ['10.77.0.2', 9999],
  ['169.254.169.254', 53], ['169.254.169.254', 9999],
  ['127.0.0.1', 53], ['127.0.0.1', 9999],
  ['100.127.0.1', 53], ['100.127.0.1', 9999], ['10.77.0.1', 53], ['10.77.0.1', 9999],
  ['8.8.8.8', 53], ['198.18.0.1', 9999],
  ['255.255.255.255', 9999], ['224.0.0.251', 5353],
  ['::1', 53], ['::1', 9999], ['2001:db8::1', 9999], ['::ffff:10.77.0.2', 9999],
  ['::ffff:127.0.0.1', 53],
];

const TCP = [
  ['203.0.113.10', 22], ['203.0.113.10', 25], ['203.0.113.10', 8080], ['203.0.113.10', 8443],
  ['203.0.113.53', 853], ['10.77.0.2', 22], ['10.77.0.2', 8080], ['169.254.169.254', 8080],
  ['127.0.0.1', 22], ['127.0.0.1', 8080], ['100.127.0.1', 22], ['100.127.0.1', 8080],
  ['10.77.0.1', 22], ['::1', 8080], ['::ffff:10.77.0.2', 8080],
];

const OWN_SERVERS = ['203.0.113.53', '10.77.0.2', '127.0.0.1', '8.8.8.8'];

async function caresWith(server, name, timeoutMs) {
  const r = new dns.promises.Resolver({ timeout: Math.min(timeoutMs, 1000), tries: 1 });
  try {
    r.setServers([server]);
    const addresses = await r.resolve4(name);
    return { addresses, error: null };
  } catch (e) {
    return { addresses: [], error: code(e) };
  } finally {
    r.cancel();
  }
}

(async () => {
  const input = await readInput();
  const name = input.probe_name;
  const timeoutMs = input.timeout_ms ?? 1500;
  const udpResults = Promise.all(UDP.map(([host, port]) => udp({
    host,
    port,
    payload: port === 53 ? dnsQuery(name) : Buffer.from('ovsr-udp-probe'),
    broadcast: host === '255.255.255.255',
    timeoutMs: Math.min(timeoutMs, 800),
  }).then((r) => ({ id: `udp ${host} ${port}`, ...r }))));
  const tcpResults = Promise.all(TCP.map(([host, port]) => tcpConnect({ host, port, timeoutMs })
    .then((r) => ({ id: `tcp ${host} ${port}`, ...r }))));
  const dnsResults = Promise.all([
    ...OWN_SERVERS.map((s) => caresWith(s, name, timeoutMs).then((r) => ({ id: `cares ${s}`, ...r }))),
    ...['203.0.113.53', '10.77.0.2', '8.8.8.8'].map((s) => dnsTcp({ host: s, name, timeoutMs })
      .then((r) => ({ id: `dns-tcp ${s}`, ...r }))),
  ]);
  let icmp;
  try {
    const s = dgram.createSocket('icmp');
    s.close();
    icmp = { created: true, error: null };
  } catch (e) {
    icmp = { created: false, error: code(e) };
  }
  out({ udp: await udpResults, tcp: await tcpResults, dns: await dnsResults, icmp });
})().catch((e) => out({ crashed: String(e) }));
