'use strict';
// HOSTILE-ish (do not run outside the sandbox). sysinfo(2) is not namespaced: the host's
// total and free memory, load and uptime are one call away. The job must see its own
// figures instead: its memory limit, what is left of it, no load, its own age. Only
// comparisons leave the sandbox, never a host value, apart from the memory limit the
// job itself was given.
const os = require('os');

const total = os.totalmem();
const free = os.freemem();
const available = process.availableMemory();
const viaBuiltin = process.getBuiltinModule('node:os');
// A patched copy cannot restore the host's figures.
let restored = 'no';
try {
  delete os.totalmem;
  os.totalmem = () => 1;
  restored = String(os.totalmem());
} catch (e) {
  restored = e.name;
}
async function main() {
  // The ES module view of node:os: its named exports are the locked functions too.
  const { totalmem: esmTotalmem, loadavg: esmLoadavg } = await import('node:os');
  process.stdout.write(JSON.stringify({
    esm_totalmem: esmTotalmem(),
    esm_loadavg: esmLoadavg(),
    totalmem: total,
    constrained_memory: process.constrainedMemory(),
    builtin_totalmem: viaBuiltin.totalmem(),
    freemem_within_limit: free > 0 && free <= total,
    available_within_limit: available > 0 && available <= total,
    loadavg: os.loadavg(),
    uptime_is_the_jobs: os.uptime() >= 0 && os.uptime() < 60,
    patched_totalmem: os.totalmem() === total ? 'kept' : restored,
  }));
}

main();
