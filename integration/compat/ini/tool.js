// Reads and writes INI text with npm's own ini package (vendored at test time).
const ini = require('./vendor/ini/lib/ini.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const value = ini.parse(input.ini);
  process.stdout.write(JSON.stringify({ value, text: ini.stringify(value, { whitespace: true }) }));
});
