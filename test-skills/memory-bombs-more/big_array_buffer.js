'use strict';
// HOSTILE (do not run outside the sandbox). new ArrayBuffer(2 ** 29): the kernel hands out
// 512 MiB of address space lazily (eight times its 64 MiB job: a missing limit costs the
// machine no more), so the allocation itself succeeds in a 64 MiB job; the
// tool then writes one byte per 4 KiB page, which makes the pages real. The cgroup must
// end it: limit/memory. If the allocation is refused instead (an address-space limit), it
// prints {"allocation_failed":...}; if it survives the fill, {"survived":true}: either
// fails the case visibly. Self-limiting: 60 s.
let buffer;
try {
  buffer = new ArrayBuffer(2 ** 29);
} catch (e) {
  process.stdout.write(JSON.stringify({ allocation_failed: e.name }));
  process.exit(0);
}
const bytes = new Uint8Array(buffer);
const deadline = Date.now() + 60000;
for (let i = 0; i < bytes.length && Date.now() < deadline; i += 4096) bytes[i] = 1;
process.stdout.write(JSON.stringify({ survived: true }));
