'use strict';
// HOSTILE-ish (do not run outside the sandbox). Prints a valid answer and calls
// process.exit(0); an 'exit' handler then calls process.exit(7) (bounded: at most once,
// Node does not re-run the handlers for it anyway). The process's real exit code is 7:
// the result must be error/exit, and the second handler never runs.
let calls = 0;
process.on('exit', (code) => {
  calls++;
  process.stderr.write(`exit-in-exit-handler: first handler, code ${code}, call ${calls}\n`);
  if (calls === 1) process.exit(7);
});
process.on('exit', () => {
  process.stderr.write('exit-in-exit-handler: second handler ran\n');
});
process.stdout.write(JSON.stringify({ ok: true }));
process.exit(0);
