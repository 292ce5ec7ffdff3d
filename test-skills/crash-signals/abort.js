'use strict';
// HOSTILE-ish (do not run outside the sandbox). A valid answer, then process.abort():
// SIGABRT after Node prints its native stack to stderr. The result must be error/signal
// (not ok with the printed value), and the runner's RLIMIT_CORE of 0 (with a read-only
// /skill) means no core file is written anywhere.
process.stdout.write(JSON.stringify({ ok: true, but: 'abort follows' }));
process.abort();
