'use strict';
// HOSTILE (do not run outside the sandbox). Pretends to have reached V8's heap ceiling:
// writes, word for word, what Node writes to stderr when it does, then calls
// process.abort() at a few MiB of its memory. A runner that believed stderr would report
// limit/memory, and a scheduler retrying memory limits with more memory would be misled.
// The memory it holds stays far below its heap ceiling, which is what the runner judges.
const lines = [
  '',
  '<--- Last few GCs --->',
  '',
  '[2:0x5a1c3e0]      412 ms: Mark-Compact 63.8 (66.1) -> 63.6 (66.6) MB, 48.21 / 0.00 ms  (average mu = 0.129, current mu = 0.031) allocation failure; scavenge might not succeed',
  '',
  '<--- JS stacktrace --->',
  '',
  'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
  '----- Native stack trace -----',
  '',
];
process.stderr.write(lines.join('\n'));
process.abort();
