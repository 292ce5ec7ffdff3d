'use strict';
// HOSTILE (do not run outside the sandbox): IP literals instead of names, in every spelling
// URL parsers and getaddrinfo accept: decimal, hex, octal, short forms, IPv6, IPv4-mapped,
// IPv4-compatible, NAT64 and 6to4 forms of loopback, the Link's LAN (10.77.0.2), the cloud
// metadata address, the Link's own addresses (100.127.0.1, 10.77.0.1), a guessed synthetic
// DNS address, multicast and broadcast; plus one public address (203.0.113.10 in the test
// network), over http and https. Input: { ca, timeout_ms }. Output: { attempts: [{ id, ... }] }
// where id is the URL, or "tcp <host>" for a raw connection to port 80 whose host string goes
// through getaddrinfo (which also parses numeric forms). Every attempt runs at once.
const { readInput, httpGet, raw, out } = require('./lib.js');

const HTTP = [
  'http://127.0.0.1/',
  'http://2130706433/',
  'http://0x7f000001/',
  'http://0177.0.0.1/',
  'http://127.1/',
  'http://0x7f.1/',
  'http://127.0.0.2/',
  'http://0.0.0.0/',
  'http://0/',
  'http://[::1]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::127.0.0.1]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[2002:7f00:1::]/',
  'http://[fe80::1]/',
  'http://[2001:db8::1]/',
  'http://[::ffff:10.77.0.2]/',
  'http://10.77.0.2/',
  'http://172818434/',
  'http://0xa4d0002/',
  'http://012.0115.0.02/',
  'http://10.77.2/',
  'http://169.254.169.254/latest/meta-data/',
  'http://2852039166/latest/meta-data/',
  'http://0xa9fea9fe/latest/meta-data/',
  'http://[::ffff:169.254.169.254]/latest/meta-data/',
  'http://100.127.0.1/',
  'http://10.77.0.1/',
  'http://198.18.0.77/',
  'http://224.0.0.1/',
  'http://255.255.255.255/',
  'http://203.0.113.10/literal',
];

const HTTPS = [
  'https://127.0.0.1/',
  'https://10.77.0.2/',
  'https://169.254.169.254/',
  'https://100.127.0.1/',
  'https://[::1]/',
  'https://203.0.113.10/literal',
];

// Host strings handed to net.connect as they are: Node passes a non-IP string to
// getaddrinfo, which reads inet_aton's numeric forms without asking DNS.
const RAW = ['2130706433', '0x7f000001', '0177.0.0.1', '127.1', '172818434', '0xa9fea9fe'];

(async () => {
  const input = await readInput();
  const timeoutMs = input.timeout_ms ?? 2000;
  const jobs = [
    ...HTTP.map((url) => httpGet(url, { timeoutMs }).then((r) => ({ id: url, ...r }))),
    ...HTTPS.map((url) => httpGet(url, { ca: input.ca, timeoutMs }).then((r) => ({ id: url, ...r }))),
    ...RAW.map((host) => raw({
      host,
      port: 80,
      send: `GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      timeoutMs,
    }).then((r) => ({ id: `tcp ${host}`, ...r }))),
  ];
  out({ attempts: await Promise.all(jobs) });
})().catch((e) => out({ crashed: String(e) }));
