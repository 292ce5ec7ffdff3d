'use strict';
// HOSTILE-ish (do not run outside the sandbox). sysinfo(2) is not namespaced: the host's
// total and free memory, load and uptime are one call away. The job must see its own
// figures instead: its memory limit, what is left of it, no load, its own age. The
// monotonic clock (process.hrtime) is not sysinfo's: it counts from the boot of the job's
// time namespace, seconds ago, not from the host's; the namespace's offsets (the host's
// uptime at the job's start) are in /proc/self/timens_offsets, which Node's permission
// model keeps from the tool. Only
// comparisons leave the sandbox, never a host value, apart from the memory limit the
// job itself was given.
const os = require('os');
const fs = require('fs');

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
    monotonic_is_the_jobs: process.hrtime.bigint() < 60n * 1000000000n,
    timens_offsets: (() => {
      try {
        fs.readFileSync('/proc/self/timens_offsets');
        return 'read';
      } catch (e) {
        return e.code;
      }
    })(),
    patched_totalmem: os.totalmem() === total ? 'kept' : restored,
  }));
}

main();
