'use strict';
// HOSTILE (do not run outside the sandbox). Tries to start 64 worker threads. Without
// --allow-worker, Node's permission model refuses each with ERR_ACCESS_DENIED before any
// thread exists. If one ever starts, it is terminated at once (idle.js also exits by
// itself after 1 s) and counted in "started", which fails the test.
const path = require('path');
const { Worker } = require('worker_threads');

const ATTEMPTS = 64;
const started = [];
const codes = new Set();
let blocked = 0;
for (let i = 0; i < ATTEMPTS; i++) {
  try {
    started.push(new Worker(path.join(__dirname, 'idle.js')));
  } catch (e) {
    blocked++;
    codes.add(e.code ?? e.name);
  }
}
Promise.all(started.map((w) => w.terminate())).finally(() => {
  process.stdout.write(JSON.stringify({ attempts: ATTEMPTS, started: started.length, blocked, codes: [...codes].sort() }));
});
