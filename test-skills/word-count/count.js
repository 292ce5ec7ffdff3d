'use strict';
// Counts words, lines and characters of input.text.
// Words and characters come from Intl.Segmenter, so "naïve", "東京" and "👋🏽" are
// counted the way a reader would count them, not by bytes or UTF-16 units.

async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function countLines(text) {
  if (text === '') return 0;
  const parts = text.split(/\r\n|\r|\n/);
  // A final line break ends the last line; it does not start a new one.
  return parts[parts.length - 1] === '' ? parts.length - 1 : parts.length;
}

function count(text) {
  const words = new Intl.Segmenter('en', { granularity: 'word' });
  const graphemes = new Intl.Segmenter('en', { granularity: 'grapheme' });
  let wordCount = 0;
  for (const s of words.segment(text)) if (s.isWordLike) wordCount++;
  let characters = 0;
  for (const _ of graphemes.segment(text)) characters++;
  return { words: wordCount, lines: countLines(text), characters };
}

readInput().then((input) => {
  if (typeof input.text !== 'string') throw new Error('input.text must be a string');
  process.stdout.write(JSON.stringify(count(input.text)));
});
