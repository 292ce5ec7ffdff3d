'use strict';
// A benign tool: resolve names. Input {names: [...], method: "lookup" | "resolve4"}.
// "lookup" is dns.lookup (getaddrinfo: /etc/hosts, then /etc/resolv.conf), all addresses;
// "resolve4" is c-ares with the servers of /etc/resolv.conf. Output {results: [{name,
// addresses, error, ms}]} in the order asked. Never throws.
const dns = require('node:dns');

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

const TIMEOUT_MS = 4000;

async function one(name, method) {
  const started = Date.now();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })), TIMEOUT_MS);
  });
  try {
    const asked = method === 'resolve4'
      ? dns.promises.resolve4(name)
      : dns.promises.lookup(name, { all: true }).then((list) => list.map((a) => a.address));
    const addresses = await Promise.race([asked, timeout]);
    return { name, addresses, error: null, ms: Date.now() - started };
  } catch (e) {
    return { name, addresses: [], error: e?.code ?? String(e), ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

(async () => {
  const input = await readInput();
  const method = input.method ?? 'lookup';
  const results = [];
  for (const name of input.names ?? []) results.push(await one(name, method));
  process.stdout.write(JSON.stringify({ results }));
})().catch((e) => process.stdout.write(JSON.stringify({ error: e?.code ?? String(e) })));
