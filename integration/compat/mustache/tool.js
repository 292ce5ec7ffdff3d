// Renders a logic-less template with mustache.js (vendored at test time).
const Mustache = require('./vendor/mustache/mustache.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  process.stdout.write(JSON.stringify({ text: Mustache.render(input.template, input.view) }));
});
