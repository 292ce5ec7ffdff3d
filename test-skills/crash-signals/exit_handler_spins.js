'use strict';
// HOSTILE (do not run outside the sandbox). A valid answer and process.exit(0), but the
// 'exit' handler (synchronous by definition) spins for up to 60 s. The process has not
// exited, so the job is still running: at wall_ms it is killed, limit/wall.
process.on('exit', () => {
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) { /* spin */ }
});
process.stdout.write(JSON.stringify({ ok: true }));
process.exit(0);
