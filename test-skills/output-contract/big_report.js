'use strict';
// A deterministic stock report of `rows` rows, written as one JSON value.
const { readInput } = require('./read_input.js');

function row(i) {
  return {
    id: i,
    sku: `SKU-${String(i).padStart(6, '0')}`,
    name: `Item number ${i}`,
    warehouse: ['Berlin', 'Lyon', 'Porto', 'Turku'][i % 4],
    qty: (i * 7) % 50,
    price_cents: (i * 137) % 10000,
    tags: i % 3 === 0 ? ['bulk', 'fragile'] : ['standard'],
  };
}

readInput().then(({ rows }) => {
  if (!Number.isInteger(rows) || rows < 0 || rows > 2000) throw new Error('rows must be an integer 0..2000');
  const items = Array.from({ length: rows }, (_, k) => row(k + 1));
  process.stdout.write(JSON.stringify({ rows: items.length, items }));
});
