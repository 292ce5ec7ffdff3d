'use strict';
// HOSTILE (do not run outside the sandbox). Grows the JavaScript heap with arrays of small
// objects that stay reachable, so the garbage collector can free nothing. The runner's
// V8 heap ceiling (below mem_bytes) or the cgroup must end it: limit/memory.
// Self-limiting: stops at an estimated 512 MiB (eight times its 64 MiB job) or after 60 s
// and prints {"survived":true,...}, which fails the test loudly; a missing limit then costs
// the machine no more than that.
const LIMIT_BYTES = 512 * 1024 ** 2;
const PER_OBJECT = 100; // rough size of one {i, s, a} object with its string and array
const BATCH = 10000;
const deadline = Date.now() + 60000;
const keep = [];
let estimated = 0;
while (estimated < LIMIT_BYTES && Date.now() < deadline) {
  const batch = new Array(BATCH);
  for (let i = 0; i < BATCH; i++) batch[i] = { i, s: `item-${keep.length}-${i}`, a: [i, i + 1] };
  keep.push(batch);
  estimated += BATCH * PER_OBJECT;
}
process.stdout.write(JSON.stringify({ survived: true, estimated_mib: Math.round(estimated / 1048576), batches: keep.length }));
