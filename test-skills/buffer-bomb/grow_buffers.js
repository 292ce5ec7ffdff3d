'use strict';
// HOSTILE (do not run outside the sandbox). Allocates memory outside the JavaScript heap:
// 8 MiB Buffers, each filled with non-zero bytes so every page is really committed, all
// kept. A V8 heap limit does not see these; the cgroup memory limit must end the job
// (limit/memory). Self-limiting: stops at 512 MiB (64 buffers, eight times its 64 MiB
// job) or 60 s and prints
// {"survived":true,...}; if an allocation is refused instead (RangeError), it prints
// {"allocation_failed":true,...}. Either fails the test loudly.
const CHUNK = 8 * 1024 * 1024;
const MAX_CHUNKS = 64; // 512 MiB
const deadline = Date.now() + 60000;
const keep = [];
let result;
try {
  while (keep.length < MAX_CHUNKS && Date.now() < deadline) {
    const buf = Buffer.allocUnsafeSlow(CHUNK);
    buf.fill(0xa5 ^ (keep.length & 0xff));
    keep.push(buf);
  }
  result = { survived: true, allocated_mib: keep.length * 8 };
} catch (e) {
  result = { allocation_failed: true, error: e.name, allocated_mib: keep.length * 8 };
}
process.stdout.write(JSON.stringify(result));
