'use strict';
// Times N plain HTTP GETs of one URL, each on a connection of its own with its own name
// lookup (agent: false), one after the other. Input: {url, n, dns_server?}: with dns_server
// the name is resolved with that server (for the same request made outside the sandbox).
// Output: {ms: [...], statuses: [...]}.
const http = require('node:http');
const dns = require('node:dns');

function lookupWith(server) {
  if (!server) return undefined;
  const resolver = new dns.Resolver();
  resolver.setServers([server]);
  return (hostname, options, callback) => {
    resolver.resolve4(hostname, (err, addrs) => {
      if (err) return callback(err);
      if (options && options.all) return callback(null, addrs.map((a) => ({ address: a, family: 4 })));
      return callback(null, addrs[0], 4);
    });
  };
}

function once(url, lookup) {
  return new Promise((resolve) => {
    const start = process.hrtime.bigint();
    const req = http.get(url, { agent: false, lookup }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6, status: res.statusCode }));
    });
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ ms: null, status: e.code ?? String(e) }));
  });
}

async function main() {
  let data = '';
  for await (const chunk of process.stdin) data += chunk;
  const input = data.trim() ? JSON.parse(data) : {};
  const n = Math.min(Math.max(input.n ?? 10, 1), 100);
  const lookup = lookupWith(input.dns_server);
  const ms = [];
  const statuses = [];
  for (let i = 0; i < n; i++) {
    const r = await once(input.url, lookup);
    ms.push(r.ms);
    statuses.push(r.status);
  }
  process.stdout.write(JSON.stringify({ ms, statuses }));
}
main();
