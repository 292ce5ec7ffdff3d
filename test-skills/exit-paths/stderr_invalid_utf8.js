'use strict';
// HOSTILE-ish (do not run outside the sandbox). Writes to stderr: 0xFF (never valid),
// 0xC3 0x28 (a lead byte followed by ASCII), 0xED 0xA0 0x80 (an encoded UTF-16 surrogate,
// invalid in UTF-8), and at the very end 0xE2 0x82, the first two bytes of the euro sign
// with the third missing. Then a valid answer. The runner keeps stderr lossily decoded
// (U+FFFD for each bad part) and the job is ok.
process.stderr.write(Buffer.concat([
  Buffer.from('before '),
  Buffer.from([0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
  Buffer.from(' after; cut euro: '),
  Buffer.from([0xe2, 0x82]),
]));
process.stdout.write(JSON.stringify({ ok: true }));
