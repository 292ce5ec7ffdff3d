'use strict';
// HOSTILE-ish (do not run outside the sandbox). A valid answer, then SIGSEGV sent to
// itself. Only in its own pid namespace (pid <= 8), per this suite's rule for signals;
// otherwise it exits 3, which fails the case. Node's SIGSEGV handler (for WebAssembly
// traps) does not swallow a signal sent by kill: the process dies by it, error/signal.
process.stdout.write(JSON.stringify({ ok: true, but: 'SIGSEGV follows' }));
if (process.pid > 8) {
  process.stderr.write(`self-sigsegv: pid ${process.pid} is not in a job pid namespace; not signalling\n`);
  process.exit(3);
}
process.kill(process.pid, 'SIGSEGV');
// Not reached if the signal kills; bounded anyway.
setTimeout(() => process.exit(0), 2000);
