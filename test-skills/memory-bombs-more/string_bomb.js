'use strict';
// HOSTILE (do not run outside the sandbox). Builds a 200 MiB string out of 200 distinct,
// flat 1 MiB strings and joins them (a flat 200 MiB copy on top), all kept reachable. With
// mem_bytes 64 MiB, V8's heap ceiling (half of it) or the cgroup ends it: limit/memory.
// Self-limiting: 200 MiB in all or 60 s, then it prints {"survived":true,...}, which
// fails the case loudly.
const MIB = 1024 * 1024;
const TARGET = 200 * MIB;
const deadline = Date.now() + 60000;
const base = 'openvibe'.repeat(MIB / 8);
const parts = [];
let total = 0;
while (total < TARGET && Date.now() < deadline) {
  // slice + a distinct last character makes a new flat string each time, not a shared one.
  parts.push(base.slice(0, -1) + String.fromCharCode(97 + (parts.length % 26)));
  total += MIB;
}
const big = parts.join('');
process.stdout.write(JSON.stringify({ survived: true, length: big.length }));
