'use strict';
// HOSTILE (do not run outside the sandbox). Uses no CPU but never exits: an interval keeps
// the event loop alive. A runner that only watches CPU time would wait forever; the wall
// clock must end it (limit/wall). Self-limiting: gives up after 60 s and prints
// {"survived":true}, which fails the test loudly.
const keepAlive = setInterval(() => {}, 1000);
setTimeout(() => {
  clearInterval(keepAlive);
  process.stdout.write(JSON.stringify({ survived: true }));
}, 60000);
