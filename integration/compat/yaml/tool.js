// Reads YAML with js-yaml (vendored at test time) and writes it back.
const yaml = require('./vendor/js-yaml/index.js');

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const value = yaml.load(input.yaml, { schema: yaml.JSON_SCHEMA });
  let error = null;
  try {
    yaml.load(input.bad_yaml);
  } catch (e) {
    error = e.name + ': ' + e.reason;
  }
  process.stdout.write(JSON.stringify({ value, dumped: yaml.dump(value, { sortKeys: false }), error }));
});
