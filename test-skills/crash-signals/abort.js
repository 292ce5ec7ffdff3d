'use strict';
// HOSTILE-ish (do not run outside the sandbox). A valid answer, then process.abort():
// SIGABRT after Node prints its native stack to stderr. The result must be error/signal
// (not ok with the printed value), and the runner's RLIMIT_CORE of 1 (with a read-only
// root) means no core is written anywhere, not even to a pipe core_pattern.
process.stdout.write(JSON.stringify({ ok: true, but: 'abort follows' }));
process.abort();
