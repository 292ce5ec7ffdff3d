'use strict';
// The "public internet" host of the egress tests (203.0.113.10 in the upstream namespace):
// HTTP on 80 and HTTPS on 443 with the certificate the fixture made for the test names.
// Every answer says who answered ({"server":"upstream", ...}), so a test can tell it from the
// LAN and loopback peers; every request is also written to stdout as one JSON line, which
// the fixture keeps (the test can see what reached the internet, with which Host/SNI, from
// which address). GET /redirect?to=URL answers 302 with Location: URL. An upgrade request on
// port 80 is answered 101, then `{"server":"upstream","upgraded":true}` and every chunk that
// comes back as `ECHO:<chunk>`.
// Usage: node upstream.js DIR ADDRESS (DIR holds key.pem and cert.pem). Prints "ready".
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const path = require('node:path');

const [dir, address] = process.argv.slice(2);

function handler(tls) {
  return (req, res) => {
    const seen = {
      server: 'upstream',
      tls,
      host: req.headers.host ?? null,
      sni: tls ? (req.socket.servername || null) : null,
      path: req.url,
      remote: req.socket.remoteAddress,
    };
    process.stdout.write(`${JSON.stringify(seen)}\n`);
    let target = null;
    try {
      const u = new URL(req.url, 'http://upstream.invalid');
      if (u.pathname === '/redirect') target = u.searchParams.get('to');
    } catch { /* not a URL: answer as usual */ }
    if (target) {
      res.writeHead(302, { location: target, 'content-length': '0' });
      res.end();
      return;
    }
    const body = JSON.stringify(seen);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
}

const plain = http.createServer(handler(false));
plain.on('upgrade', (req, socket) => {
  const seen = {
    server: 'upstream', tls: false, host: req.headers.host ?? null, sni: null,
    path: req.url, remote: req.socket.remoteAddress, upgrade: req.headers.upgrade ?? null,
  };
  process.stdout.write(`${JSON.stringify(seen)}\n`);
  socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'
    + '{"server":"upstream","upgraded":true}\n');
  socket.on('data', (chunk) => socket.write(`ECHO:${chunk}`));
  socket.on('error', () => socket.destroy());
});
const secure = https.createServer({
  key: fs.readFileSync(path.join(dir, 'key.pem')),
  cert: fs.readFileSync(path.join(dir, 'cert.pem')),
}, handler(true));

let listening = 0;
const up = () => { listening += 1; if (listening === 2) process.stdout.write('ready\n'); };
plain.listen(80, address, up);
secure.listen(443, address, up);
