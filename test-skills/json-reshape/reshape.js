'use strict';
// Reshapes an array of records:
//   fields  ["id", "city=address.city"]  picks (and renames) fields, dotted paths reach
//           into nested objects, a missing field is null; no fields keeps every field.
//   flatten true turns nested objects into dotted keys: {"a":{"b":1}} -> {"a.b":1}.

async function readInput() {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

function parseField(spec) {
  const eq = spec.indexOf('=');
  const out = eq === -1 ? spec : spec.slice(0, eq);
  const path = (eq === -1 ? spec : spec.slice(eq + 1)).split('.');
  return { out, path };
}

function get(value, path) {
  for (const key of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return null;
    value = value[key];
  }
  return value === undefined ? null : value;
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// Entries, not assignments, so a key like "__proto__" stays an ordinary key.
function flattenEntries(obj, prefix, out) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix === '' ? k : `${prefix}.${k}`;
    if (isPlainObject(v) && Object.keys(v).length > 0) flattenEntries(v, key, out);
    else out.push([key, v]);
  }
  return out;
}

function reshape(records, fields, flatten) {
  const specs = fields.map(parseField);
  return records.map((record, i) => {
    if (!isPlainObject(record)) throw new Error(`record ${i} is not an object`);
    const picked = specs.length === 0 ? record : Object.fromEntries(specs.map((s) => [s.out, get(record, s.path)]));
    return flatten ? Object.fromEntries(flattenEntries(picked, '', [])) : picked;
  });
}

readInput().then((input) => {
  let records;
  try {
    records = JSON.parse(input.json);
  } catch (e) {
    throw new Error(`input.json is not valid JSON: ${e.message}`);
  }
  if (!Array.isArray(records)) throw new Error('input.json must be a JSON array of records');
  const out = reshape(records, input.fields ?? [], input.flatten === true);
  process.stdout.write(JSON.stringify({ count: out.length, records: out }));
});
