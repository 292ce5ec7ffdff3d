'use strict';
// HOSTILE (do not run outside the sandbox): the helpers of this skill's tools. Each helper
// makes one attempt to get out, bounded by a short timeout, and reports what happened as
// plain data; none of them throws. `servers` lists every `"server":"<name>"` found in what
// came back: the test peers say who they are that way, so an answer from the Link's LAN or
// loopback shows up as "lan" / "link-loopback" / "link-own" whatever else happened.
const net = require('node:net');
const tls = require('node:tls');
const http = require('node:http');
const https = require('node:https');
const dgram = require('node:dgram');

const REFUSAL = 'openvibe-skill-runner refused this connection:';
// The runner marks its refusals on port 80 with this header; its value is the code.
const REFUSAL_HEADER = 'x-skill-runner-refused';
const KEEP = 2048;

function readInput() {
  return new Promise((resolve) => {
    let data = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (c) => { data += c; });
    process.stdin.on('end', () => {
      try { resolve(data.trim() ? JSON.parse(data) : {}); } catch { resolve({}); }
    });
  });
}

function code(e) {
  return e?.code ?? e?.cause?.code ?? e?.name ?? String(e);
}

// The words with the code: a TLS alert that arrives while a request is being written comes as
// EPROTO with OpenSSL's reason ("tlsv1 alert access denied") only in the message.
function detail(e) {
  return String(e?.message ?? e).slice(0, 300);
}

// The refusal codes in the responses of `text` (raw HTTP), in order.
function refusals(text) {
  return [...String(text ?? '').matchAll(/^x-skill-runner-refused: *([a-z_]+)\r?$/gim)].map((m) => m[1]);
}

function servers(text) {
  return [...String(text ?? '').matchAll(/"server":"([a-z-]+)"/g)].map((m) => m[1]);
}

// A promise that settles once. `body(finish, onEnd)` starts the attempt and may return a
// function that describes it so far: on timeout the result is that, with error 'TIMEOUT'.
function attempt(timeoutMs, body) {
  const started = Date.now();
  return new Promise((resolve) => {
    let done = false;
    let snapshot = () => ({});
    const cleanups = [];
    const finish = (r) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const c of cleanups) { try { c(); } catch { /* already gone */ } }
      resolve({ ...r, ms: Date.now() - started });
    };
    const timer = setTimeout(() => finish({ ...snapshot(), error: 'TIMEOUT' }), timeoutMs);
    try {
      const s = body(finish, (c) => cleanups.push(c));
      if (typeof s === 'function') snapshot = s;
    } catch (e) {
      finish({ ...snapshot(), error: code(e), message: detail(e) });
    }
  });
}

// GET a URL with node:http / node:https as any tool would (own connection, no redirect).
// -> { status, refused (the refusal code, or null), servers, body, error, ms }
function httpGet(url, { ca, servername, headers, timeoutMs = 2000 } = {}) {
  return attempt(timeoutMs, (finish, onEnd) => {
    const u = new URL(url);
    const mod = u.protocol === 'https:' ? https : http;
    const options = { agent: false, headers: headers ?? {} };
    if (u.protocol === 'https:') {
      options.rejectUnauthorized = false;
      if (ca) options.ca = ca;
      if (servername) options.servername = servername;
    }
    const req = mod.get(u, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { if (body.length < KEEP) body += c; });
      const done = (error, message) => finish({
        status: res.statusCode,
        refused: res.headers[REFUSAL_HEADER] ?? null,
        servers: servers(body),
        body: body.slice(0, 300),
        error,
        message,
      });
      res.on('end', () => done(null, null));
      res.on('error', (e) => done(code(e), detail(e)));
    });
    onEnd(() => req.destroy());
    req.on('error', (e) => finish({ status: null, refused: null, servers: [], body: null, error: code(e), message: detail(e) }));
    return () => ({ status: null, refused: null, servers: [], body: null });
  });
}

// Raw TCP (or TLS) to host:port, write `send` once connected (once the handshake is done for
// TLS; the certificate is not checked, so a mismatched name does not stop us on our side),
// then read until the peer closes. -> { connected, secure, status, statuses, refused (the
// first refusal code, or null), refusals, servers, error, ms }
function raw({ host, port, useTls = false, servername, ca, send, timeoutMs = 2000 }) {
  return attempt(timeoutMs, (finish, onEnd) => {
    let text = '';
    let connected = false;
    let secure = false;
    const state = () => {
      const statuses = [...text.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1]));
      const bodyAt = text.indexOf('\r\n\r\n');
      const body = bodyAt >= 0 ? text.slice(bodyAt + 4) : '';
      return {
        connected,
        secure,
        status: statuses[0] ?? null,
        statuses,
        refused: refusals(text)[0] ?? null,
        refusals: refusals(text),
        servers: servers(text),
      };
    };
    const report = (error, message = null) => finish({ ...state(), error, message });
    let socket;
    if (useTls) {
      const options = { host, port, rejectUnauthorized: false };
      if (servername) options.servername = servername;
      if (ca) options.ca = ca;
      socket = tls.connect(options);
      socket.on('connect', () => { connected = true; });
      socket.on('secureConnect', () => { secure = true; if (send) socket.write(send); });
    } else {
      socket = net.connect({ host, port });
      socket.on('connect', () => { connected = true; if (send) socket.write(send); });
    }
    onEnd(() => socket.destroy());
    socket.setEncoding('latin1');
    socket.on('data', (c) => { if (text.length < 16384) text += c; });
    socket.on('end', () => report(null));
    socket.on('close', () => report(null));
    socket.on('error', (e) => report(code(e), detail(e)));
    return state;
  });
}

// A DNS query (RD set, one question, class IN) for `name`, type `qtype` (1 = A, 28 = AAAA).
function dnsQuery(name, qtype = 1) {
  const labels = name.split('.').filter((l) => l.length > 0);
  const parts = [Buffer.from([0x4f, 0x56, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of labels) {
    const b = Buffer.from(l, 'latin1');
    parts.push(Buffer.from([b.length]), b);
  }
  parts.push(Buffer.from([0, qtype >> 8, qtype & 255, 0, 1]));
  return Buffer.concat(parts);
}

// The rcode and the A / AAAA addresses of a DNS answer (best effort, never throws).
function dnsAnswers(buf) {
  const out = { rcode: null, addresses: [] };
  try {
    if (buf.length < 12) return out;
    out.rcode = buf[3] & 15;
    const qd = buf.readUInt16BE(4);
    const an = buf.readUInt16BE(6);
    let i = 12;
    const skipName = () => {
      for (;;) {
        const len = buf[i];
        if (len === 0) { i += 1; return; }
        if ((len & 0xc0) === 0xc0) { i += 2; return; }
        i += 1 + len;
      }
    };
    for (let q = 0; q < qd; q++) { skipName(); i += 4; }
    for (let a = 0; a < an && i < buf.length; a++) {
      skipName();
      const type = buf.readUInt16BE(i);
      const rdlen = buf.readUInt16BE(i + 8);
      const rdata = buf.subarray(i + 10, i + 10 + rdlen);
      if (type === 1 && rdlen === 4) out.addresses.push([...rdata].join('.'));
      if (type === 28 && rdlen === 16) {
        const groups = [];
        for (let g = 0; g < 16; g += 2) groups.push(rdata.readUInt16BE(g).toString(16));
        out.addresses.push(groups.join(':'));
      }
      i += 10 + rdlen;
    }
  } catch { /* what was parsed so far */ }
  return out;
}

// One UDP datagram to host:port, then wait for one reply.
// -> { sent, reply, reply_bytes, from, dns (a reply's answers, for port 53), error, ms }
function udp({ host, port, payload, broadcast = false, timeoutMs = 800 }) {
  return attempt(timeoutMs, (finish, onEnd) => {
    let sent = false;
    const state = () => ({ sent, reply: false, reply_bytes: 0, from: null, dns: null });
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    onEnd(() => socket.close());
    socket.on('error', (e) => finish({ ...state(), error: code(e) }));
    socket.on('message', (msg, rinfo) => finish({
      sent,
      reply: true,
      reply_bytes: msg.length,
      from: `${rinfo.address}:${rinfo.port}`,
      dns: port === 53 ? dnsAnswers(msg) : null,
      error: null,
    }));
    socket.bind(0, () => {
      try {
        if (broadcast) socket.setBroadcast(true);
        socket.send(payload, port, host, (e) => {
          if (e) finish({ ...state(), error: code(e) });
          else sent = true;
        });
      } catch (e) {
        finish({ ...state(), error: code(e) });
      }
    });
    return state;
  });
}

// A DNS query over TCP to host:53 (length-prefixed). -> { connected, dns, error, ms }
function dnsTcp({ host, port = 53, name, timeoutMs = 1500 }) {
  return attempt(timeoutMs, (finish, onEnd) => {
    let connected = false;
    let data = Buffer.alloc(0);
    const socket = net.connect({ host, port });
    onEnd(() => socket.destroy());
    socket.on('connect', () => {
      connected = true;
      const q = dnsQuery(name);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(q.length);
      socket.write(Buffer.concat([len, q]));
    });
    socket.on('data', (c) => {
      data = Buffer.concat([data, c]);
      if (data.length >= 2 && data.length >= 2 + data.readUInt16BE(0)) {
        finish({ connected, dns: dnsAnswers(data.subarray(2)), error: null });
      }
    });
    socket.on('error', (e) => finish({ connected, dns: null, error: code(e) }));
    socket.on('close', () => finish({ connected, dns: null, error: 'CLOSED' }));
    return () => ({ connected, dns: null });
  });
}

// Only connect: { connected, error, ms } as soon as the connection opens or fails.
function tcpConnect({ host, port, timeoutMs = 1500 }) {
  return attempt(timeoutMs, (finish, onEnd) => {
    const socket = net.connect({ host, port });
    onEnd(() => socket.destroy());
    socket.on('connect', () => finish({ connected: true, error: null }));
    socket.on('error', (e) => finish({ connected: false, error: code(e) }));
    return () => ({ connected: false });
  });
}

function out(value) {
  process.stdout.write(JSON.stringify(value));
}

module.exports = { REFUSAL, REFUSAL_HEADER, refusals, readInput, code, detail, servers, attempt, httpGet, raw, dnsQuery, dnsAnswers, udp, dnsTcp, tcpConnect, out };
