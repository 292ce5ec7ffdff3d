// Parses CSV text with Papa Parse (papaparse, vendored at test time).
const Papa = require('./vendor/papaparse/papaparse.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const parsed = Papa.parse(input.csv, {
    header: input.header === true,
    dynamicTyping: input.dynamic_typing === true,
    skipEmptyLines: true,
  });
  process.stdout.write(JSON.stringify({
    fields: parsed.meta.fields || null,
    rows: parsed.data,
    errors: parsed.errors,
    back: Papa.unparse(parsed.data),
  }));
});
