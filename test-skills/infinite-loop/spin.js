'use strict';
// HOSTILE (do not run outside the sandbox). A busy loop that never returns to the event
// loop, so no timer or signal handler in Node can run: only the runner's wall clock kill
// ends it (limit/wall). Self-limiting: after 60 s (more than any allowed wall_ms) it
// stops and prints {"survived":true,...}, which fails the test loudly instead of hanging.
const deadline = Date.now() + 60000;
let spins = 0;
while (Date.now() < deadline) spins++;
process.stdout.write(JSON.stringify({ survived: true, spins }));
