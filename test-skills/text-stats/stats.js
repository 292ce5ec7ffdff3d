'use strict';
// Unicode-aware text measurements.
//   graphemes   what a reader sees as one character ("👨‍👩‍👧" is 1, "é" as e+◌́ is 1)
//   code_points Unicode scalar values; utf16_units what String#length says;
//   utf8_bytes  the size on the wire.
// Letters (\p{L}) are counted after NFC normalization and lower-casing, so "É", "é" and
// "e\u0301" are the same letter. Ties in top_letters are broken by code point order.

async function readInput() {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

function stats(text, top) {
  let graphemes = 0;
  for (const _ of new Intl.Segmenter('en', { granularity: 'grapheme' }).segment(text)) graphemes++;

  const freq = new Map();
  let letters = 0;
  for (const ch of text.normalize('NFC').toLowerCase()) {
    if (!/^\p{L}$/u.test(ch)) continue;
    letters++;
    freq.set(ch, (freq.get(ch) ?? 0) + 1);
  }
  const byCount = [...freq].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

  return {
    graphemes,
    code_points: [...text].length,
    utf16_units: text.length,
    utf8_bytes: Buffer.byteLength(text, 'utf8'),
    letters,
    top_letters: byCount.slice(0, top).map(([letter, count]) => ({ letter, count })),
  };
}

readInput().then((input) => {
  const top = Number.isInteger(input.top) && input.top > 0 ? Math.min(input.top, 50) : 5;
  process.stdout.write(JSON.stringify(stats(String(input.text), top)));
});
