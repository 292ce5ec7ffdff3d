'use strict';
// A benign tool a skill author would write: GET a URL with node:http / node:https and report
// what came back. Input: one request ({url, ca, servername, headers, follow, timeout_ms}) or
// {requests: [...]} (done one after the other, in order). Each request opens a connection of
// its own (agent: false), so a later request looks its name up and connects again.
// Output: {status, refused, body, error, message, hops} for one request, {results: [...]} for a list. Never throws.
const http = require('node:http');
const https = require('node:https');

const BODY_MAX = 4096;

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

// The words with the code: a TLS alert that arrives while the request is being written comes
// as EPROTO with OpenSSL's reason ("tlsv1 alert access denied") only in the message.
function detail(e) {
  return String(e?.message ?? e).slice(0, 300);
}

// One GET, no redirect: {status, location, body, error}.
function once(url, req, timeoutMs) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(timer); resolve(r); } };
    const timer = setTimeout(() => { try { request.destroy(); } catch { /* gone */ } finish({ status: null, location: null, body: null, error: 'TIMEOUT', message: null }); }, timeoutMs);
    let request;
    try {
      const u = new URL(url);
      const mod = u.protocol === 'https:' ? https : http;
      const options = { agent: false, headers: req.headers ?? {} };
      if (u.protocol === 'https:') {
        if (req.ca) options.ca = req.ca;
        if (req.servername) options.servername = req.servername;
      }
      request = mod.get(u, options, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => { if (body.length < BODY_MAX) body += c; });
        // The runner marks its own refusals with a header; a program can tell them from a
        // server's answer.
        const refused = res.headers['x-skill-runner-refused'] ?? null;
        res.on('end', () => finish({ status: res.statusCode, refused, location: res.headers.location ?? null, body: body.slice(0, BODY_MAX), error: null, message: null }));
        res.on('error', (e) => finish({ status: res.statusCode, refused, location: null, body: body.slice(0, BODY_MAX), error: code(e), message: detail(e) }));
      });
      request.on('error', (e) => finish({ status: null, location: null, body: null, error: code(e), message: detail(e) }));
    } catch (e) {
      finish({ status: null, location: null, body: null, error: code(e), message: detail(e) });
    }
  });
}

async function get(req) {
  const timeoutMs = req.timeout_ms ?? 3000;
  const follow = req.follow ?? 0;
  let url = req.url;
  const hops = [];
  for (;;) {
    const r = await once(url, req, timeoutMs);
    hops.push({ url, status: r.status, error: r.error });
    const redirect = [301, 302, 303, 307, 308].includes(r.status) && r.location;
    if (!redirect || hops.length > follow) {
      return { url: req.url, status: r.status, refused: r.refused ?? null, body: r.body, error: r.error, message: r.message, hops };
    }
    try { url = new URL(r.location, url).href; } catch (e) {
      return { url: req.url, status: r.status, body: r.body, error: code(e), message: detail(e), hops };
    }
  }
}

(async () => {
  const input = await readInput();
  if (Array.isArray(input.requests)) {
    const defaults = { ca: input.ca, timeout_ms: input.timeout_ms };
    const results = [];
    for (const r of input.requests) results.push(await get({ ...defaults, ...r }));
    process.stdout.write(JSON.stringify({ results }));
  } else {
    process.stdout.write(JSON.stringify(await get(input)));
  }
})().catch((e) => process.stdout.write(JSON.stringify({ error: code(e) })));
