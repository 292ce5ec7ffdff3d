'use strict';
// HOSTILE (do not run outside the sandbox). Each promise reaction queues the next one, so
// the microtask queue never empties and Node's event loop never gets back to timers or
// I/O: a setTimeout-based self-check would never run, so the chain checks the clock
// itself every 65,536 steps and stops after 60 s ({"survived":true}, failing the case).
// Memory stays flat (one pending reaction at a time). With wall_ms 1000 the runner must
// kill it at the wall clock: limit/wall, even though the process never blocks in a syscall.
const deadline = Date.now() + 60000;
let steps = 0;
function step() {
  steps++;
  if ((steps & 0xffff) === 0 && Date.now() > deadline) {
    process.stdout.write(JSON.stringify({ survived: true, steps }));
    return;
  }
  Promise.resolve().then(step);
}
step();
