'use strict';
// HOSTILE (do not run outside the sandbox). Buffer.allocUnsafeSlow skips Node's pool and
// asks for fresh memory each time, outside the V8 heap: only the cgroup's memory limit can
// stop it. Each 8 MiB block is filled, so its pages are really used. Self-limiting: 512 MiB
// (eight times its 64 MiB job) or 60 s, then {"survived":true,...}, which fails the case.
const BLOCK = 8 * 1024 * 1024;
const LIMIT = 512 * 1024 ** 2;
const deadline = Date.now() + 60000;
const keep = [];
let total = 0;
while (total < LIMIT && Date.now() < deadline) {
  const b = Buffer.allocUnsafeSlow(BLOCK);
  b.fill(keep.length & 0xff);
  keep.push(b);
  total += BLOCK;
}
process.stdout.write(JSON.stringify({ survived: true, mib: total / 1048576 }));
