// Renders Markdown to HTML with marked (vendored at test time).
const { marked } = require('./vendor/marked/marked.min.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const tokens = marked.lexer(input.markdown).map((t) => t.type);
  process.stdout.write(JSON.stringify({ html: marked.parse(input.markdown, { gfm: true }), tokens }));
});
