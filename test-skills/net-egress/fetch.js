'use strict';
// A benign tool written the way most authors write one today: the global fetch().
// Input: {urls: [...], batch}. Without `batch` the URLs are fetched one after the other; with
// it, `batch` at a time, all of a batch at once, each batch done before the next starts (the
// default agent keeps the connections of one batch open, idle, for the next).
// Output: {results: [{url, status, refused, body, error}]} in the order given. Never throws.
async function one(url) {
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(5000) });
    // The runner marks its own refusals with a header: a program can tell them apart.
    const refused = res.headers.get('x-skill-runner-refused');
    return { url, status: res.status, refused, body: (await res.text()).slice(0, 4096), error: null };
  } catch (e) {
    return { url, status: null, refused: null, body: null, error: e?.cause?.code ?? e?.code ?? e?.name ?? String(e) };
  }
}

async function main() {
  let data = '';
  for await (const chunk of process.stdin) data += chunk;
  const input = data.trim() ? JSON.parse(data) : {};
  const urls = input.urls ?? [];
  const results = [];
  if (input.batch) {
    for (let i = 0; i < urls.length; i += input.batch) {
      results.push(...(await Promise.all(urls.slice(i, i + input.batch).map(one))));
    }
  } else {
    for (const url of urls) results.push(await one(url));
  }
  process.stdout.write(JSON.stringify({ results }));
}
main().catch((e) => process.stdout.write(JSON.stringify({ error: String(e) })));
