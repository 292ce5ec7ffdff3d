'use strict';
// HOSTILE (do not run outside the sandbox). Floods stdout: 1 MiB chunks, 16 MiB at most,
// shaped like the start of a JSON string that never ends. stdout over 64 KiB must end
// the job at once (limit/output), not after the wall clock. On Linux, Node writes to a
// pipe synchronously, so the loop blocks whenever the runner is not reading.
const MIB = 1 << 20;
const chunk = Buffer.alloc(MIB, 'A');
process.stdout.write('{"flood":"');
for (let i = 0; i < 16; i++) process.stdout.write(chunk);
process.stdout.write('"}');
