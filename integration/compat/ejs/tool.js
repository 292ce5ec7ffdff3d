// Renders an EJS template (ejs, vendored at test time). EJS compiles every template to
// JavaScript source and runs it with `new Function`, which the contract's
// --disallow-code-generation-from-strings refuses: under the runner this tool fails.
const ejs = require('./vendor/ejs/lib/ejs.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  process.stdout.write(JSON.stringify({ text: ejs.render(input.template, input.data) }));
});
