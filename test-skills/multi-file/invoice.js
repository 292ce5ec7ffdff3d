'use strict';
// Entry point: parses the invoice lines and leaves the arithmetic to lib/math.js and
// the presentation to lib/format.js (which itself requires lib/math.js).
const { toCents, sum, percentOf } = require('./lib/math.js');
const { money } = require('./lib/format.js');

async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function parseItem(spec) {
  const m = /^([^:]{1,40}):([0-9]{1,4}):([0-9]{1,7}(?:\.[0-9]{1,2})?)$/.exec(spec);
  if (!m) throw new Error(`not an invoice line: ${JSON.stringify(spec)}`);
  return { name: m[1].trim(), qty: Number(m[2]), unitCents: toCents(m[3]) };
}

readInput().then((input) => {
  const cur = input.currency;
  const items = input.items.map(parseItem);
  const lines = items.map((it) => ({
    item: it.name,
    qty: it.qty,
    unit: money(it.unitCents, cur),
    amount: money(it.qty * it.unitCents, cur),
  }));
  const subtotal = sum(items.map((it) => it.qty * it.unitCents));
  const tax = percentOf(subtotal, input.tax_percent ?? 0);
  process.stdout.write(JSON.stringify({
    lines,
    subtotal: money(subtotal, cur),
    tax: money(tax, cur),
    total: money(subtotal + tax, cur),
    total_cents: subtotal + tax,
  }));
});
