'use strict';
// RFC 4180 CSV parser. A field is either plain (no quotes in it) or wrapped in double
// quotes, inside which "" is one quote and line breaks and delimiters are data.
// Records end at CRLF, LF or CR; a line break at the very end does not add a record.
// Malformed input (an unterminated quote, a quote inside a plain field, text after a
// closing quote, a row whose width differs from the header) is an error, not a guess.

async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function parseCsv(text, delim) {
  const rows = [];
  let row = [];
  let i = 0;
  let line = 1;
  const n = text.length;
  if (n === 0) return rows;
  for (;;) {
    let field = '';
    if (text[i] === '"') {
      const startLine = line;
      i++;
      for (;;) {
        if (i >= n) throw new Error(`unterminated quoted field starting on line ${startLine}`);
        const c = text[i];
        if (c === '"') {
          if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
          i++;
          break;
        }
        if (c === '\n') line++;
        field += c;
        i++;
      }
      if (i < n && text[i] !== delim && text[i] !== '\r' && text[i] !== '\n') {
        throw new Error(`unexpected character after closing quote on line ${line}`);
      }
    } else {
      while (i < n && text[i] !== delim && text[i] !== '\r' && text[i] !== '\n') {
        if (text[i] === '"') throw new Error(`quote inside an unquoted field on line ${line}`);
        field += text[i++];
      }
    }
    row.push(field);
    if (i >= n) { rows.push(row); break; }
    if (text[i] === delim) { i++; continue; }
    // line break: CRLF, LF or CR
    i += text[i] === '\r' && text[i + 1] === '\n' ? 2 : 1;
    line++;
    rows.push(row);
    row = [];
    if (i >= n) break;
  }
  return rows;
}

readInput().then((input) => {
  const delim = input.delimiter ?? ',';
  const rows = parseCsv(input.csv, delim);
  if (input.header === false) {
    process.stdout.write(JSON.stringify({ row_count: rows.length, rows }));
    return;
  }
  if (rows.length === 0) throw new Error('no header row');
  const columns = rows[0];
  const seen = new Set();
  for (const c of columns) {
    if (seen.has(c)) throw new Error(`duplicate column name ${JSON.stringify(c)}`);
    seen.add(c);
  }
  const records = rows.slice(1).map((r, k) => {
    if (r.length !== columns.length) {
      throw new Error(`row ${k + 1} has ${r.length} fields, the header has ${columns.length}`);
    }
    return Object.fromEntries(columns.map((c, j) => [c, r[j]]));
  });
  process.stdout.write(JSON.stringify({ columns, row_count: records.length, rows: records }));
});
