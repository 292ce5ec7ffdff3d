'use strict';
// HOSTILE (do not run outside the sandbox). Writes a complete JSON value of about 60 KiB
// (under the 64 KiB output limit), then never exits: an idle interval that stops by itself
// after 60 s. The output is only an answer once the tool exits 0, so at wall_ms the runner
// must kill it and report limit/wall, not ok with what was written.
process.stdout.write(JSON.stringify({ pad: 'x'.repeat(60 * 1024) }));
const deadline = Date.now() + 60000;
const timer = setInterval(() => { if (Date.now() > deadline) clearInterval(timer); }, 1000);
