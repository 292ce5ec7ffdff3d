'use strict';
// HOSTILE-ish (do not run outside the sandbox). Writes exactly 1 MiB to stderr (1024 lines
// of 1024 bytes), optionally starting with two invalid UTF-8 bytes, then prints
// {"ok":true}. The runner must keep draining stderr (a pipe that fills would block the
// tool until the wall clock), keep its first 16 KiB, decode it lossily (U+FFFD for bad
// bytes) and set stderr_truncated.
async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  return text === '' ? {} : JSON.parse(text);
}

readInput().then((input) => {
  const LINES = 1024;
  if (input.invalid_utf8 === true) {
    process.stderr.write(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(' after invalid bytes\n')]));
  }
  for (let i = 0; i < LINES; i++) {
    const head = `stderr-flood line ${String(i).padStart(4, '0')} `;
    process.stderr.write(head + 'x'.repeat(1024 - head.length - 1) + '\n');
  }
  process.stdout.write(JSON.stringify({ ok: true }));
});
