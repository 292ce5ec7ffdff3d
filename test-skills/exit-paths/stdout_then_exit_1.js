'use strict';
// HOSTILE-ish (do not run outside the sandbox). A valid JSON value on stdout followed by
// exit code 1 (set after the write has completed). ok needs exit 0: the result must be
// error/exit, and it must not carry the value as `output`.
process.stdout.write(JSON.stringify({ ok: true, but: 'exit code 1 follows' }), () => {
  process.exitCode = 1;
});
