'use strict';
// Writes {"pad":"xxx…"} of exactly `bytes` bytes, no trailing newline.
const { readInput } = require('./read_input.js');

const EMPTY = '{"pad":""}'.length; // 10

readInput().then(({ bytes }) => {
  if (!Number.isInteger(bytes) || bytes < EMPTY || bytes > 1 << 20) throw new Error('bytes must be an integer 10..1048576');
  process.stdout.write(`{"pad":"${'x'.repeat(bytes - EMPTY)}"}`);
});
