'use strict';
// HOSTILE (do not run outside the sandbox): get the proxy to reach something else than the
// name a connection was made for. Input: { allowed, other, ca, timeout_ms } where `allowed`
// is a name the job may reach and `other` another name (allowed too, or not).
//   1. before any lookup: connect to guessed synthetic addresses (198.18.0.1, ...) with the
//      allowed name as Host / SNI;
//   2. look the allowed name up (its synthetic address: `allowed_address`);
//   3. connect to that address and lie: Host of the LAN's name or address, of loopback, of the
//      other name, of a suffix trick, no Host at all, two Hosts, an absolute-form target, a
//      second pipelined request for another host; SNI of the LAN's name, of the other name,
//      none; the right SNI and then another Host inside TLS; another port.
//   The "host_ok" and "sni_ok" attempts are the controls: the same path with the truth.
// Output: { allowed_address, attempts: [{ id, ... }] }.
const dns = require('node:dns');
const { readInput, raw, tcpConnect, code, out } = require('./lib.js');

function req(host, extra = '') {
  return `GET /trick HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`;
}

(async () => {
  const input = await readInput();
  const allowed = input.allowed;
  const other = input.other;
  const ca = input.ca;
  const timeoutMs = input.timeout_ms ?? 2000;
  const attempts = [];
  const run = async (id, p) => attempts.push({ id, ...(await p) });

  await Promise.all([
    run('guess_first_synthetic', raw({ host: '198.18.0.1', port: 80, send: req(allowed), timeoutMs })),
    run('guess_far_synthetic', raw({ host: '198.18.200.7', port: 80, send: req(allowed), timeoutMs })),
    run('guess_synthetic_tls', raw({ host: '198.19.255.254', port: 443, useTls: true, servername: allowed, send: req(allowed), timeoutMs })),
  ]);

  let address = null;
  let lookupError = null;
  try {
    address = (await dns.promises.lookup(allowed, { family: 4 })).address;
  } catch (e) {
    lookupError = code(e);
  }
  if (address) {
    const a = address;
    await Promise.all([
      run('host_ok', raw({ host: a, port: 80, send: req(allowed), timeoutMs })),
      run('host_lan_name', raw({ host: a, port: 80, send: req('lan.upstream.net'), timeoutMs })),
      run('host_lan_ip', raw({ host: a, port: 80, send: req('10.77.0.2'), timeoutMs })),
      run('host_metadata_ip', raw({ host: a, port: 80, send: req('169.254.169.254'), timeoutMs })),
      run('host_loopback', raw({ host: a, port: 80, send: req('127.0.0.1'), timeoutMs })),
      run('host_loopback_decimal', raw({ host: a, port: 80, send: req('2130706433'), timeoutMs })),
      run('host_other', raw({ host: a, port: 80, send: req(other), timeoutMs })),
      run('host_suffix_trick', raw({ host: a, port: 80, send: req(`${allowed}.lan.upstream.net`), timeoutMs })),
      run('host_prefix_trick', raw({ host: a, port: 80, send: req(`lan.upstream.net.${allowed}`), timeoutMs })),
      run('host_missing', raw({ host: a, port: 80, send: 'GET /trick HTTP/1.0\r\n\r\n', timeoutMs })),
      run('host_twice', raw({ host: a, port: 80, send: `GET /trick HTTP/1.1\r\nHost: ${allowed}\r\nHost: lan.upstream.net\r\nConnection: close\r\n\r\n`, timeoutMs })),
      run('absolute_form', raw({ host: a, port: 80, send: `GET http://lan.upstream.net/trick HTTP/1.1\r\nHost: ${allowed}\r\nConnection: close\r\n\r\n`, timeoutMs })),
      run('pipelined', raw({ host: a, port: 80, send: `GET /one HTTP/1.1\r\nHost: ${allowed}\r\n\r\nGET /two HTTP/1.1\r\nHost: lan.upstream.net\r\nConnection: close\r\n\r\n`, timeoutMs })),
      run('sni_ok', raw({ host: a, port: 443, useTls: true, servername: allowed, ca, send: req(allowed), timeoutMs })),
      run('sni_lan_name', raw({ host: a, port: 443, useTls: true, servername: 'lan.upstream.net', send: req(allowed), timeoutMs })),
      run('sni_other', raw({ host: a, port: 443, useTls: true, servername: other, send: req(other), timeoutMs })),
      run('sni_missing', raw({ host: a, port: 443, useTls: true, send: req(allowed), timeoutMs })),
      run('sni_ok_host_lan', raw({ host: a, port: 443, useTls: true, servername: allowed, send: req('lan.upstream.net'), timeoutMs })),
      run('plain_http_on_443', raw({ host: a, port: 443, send: req(allowed), timeoutMs })),
      run('tls_on_80', raw({ host: a, port: 80, useTls: true, servername: allowed, send: req(allowed), timeoutMs })),
      run('other_port_8080', tcpConnect({ host: a, port: 8080, timeoutMs })),
      run('other_port_22', tcpConnect({ host: a, port: 22, timeoutMs })),
    ]);
  }
  const order = (x) => x.id;
  attempts.sort((x, y) => (order(x) < order(y) ? -1 : 1));
  out({ allowed_address: address, lookup_error: lookupError, attempts });
})().catch((e) => out({ crashed: String(e) }));
