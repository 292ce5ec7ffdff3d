'use strict';
// A benign tool written the way most authors write one today: the global fetch().
// Input: {urls: [...]}. Output: {results: [{url, status, body, error}]}. Never throws.
async function main() {
  let data = '';
  for await (const chunk of process.stdin) data += chunk;
  const input = data.trim() ? JSON.parse(data) : {};
  const results = [];
  for (const url of input.urls ?? []) {
    try {
      const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(5000) });
      results.push({ url, status: res.status, body: (await res.text()).slice(0, 4096), error: null });
    } catch (e) {
      results.push({ url, status: null, body: null, error: e?.cause?.code ?? e?.code ?? e?.name ?? String(e) });
    }
  }
  process.stdout.write(JSON.stringify({ results }));
}
main().catch((e) => process.stdout.write(JSON.stringify({ error: String(e) })));
