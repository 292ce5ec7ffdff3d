'use strict';
// HOSTILE (do not run outside the sandbox). Tries to start another process or thread in
// every way Node offers. The command is `id` (harmless if it ever ran); fork runs
// child.js, which exits at once. Expected: each attempt throws ERR_ACCESS_DENIED
// synchronously (permission model: no --allow-child-process, no --allow-worker;
// process.binding is refused too). If one is not blocked, the tool waits at most 2 s
// for it, kills it, and reports blocked: false.
const cp = require('child_process');
const path = require('path');
const { Worker } = require('worker_threads');

function attemptSync(run) {
  try {
    run();
    return { blocked: false };
  } catch (e) {
    return e.code === 'ERR_ACCESS_DENIED' ? { blocked: true, code: e.code } : { blocked: false, code: e.code ?? e.name };
  }
}

// For the async APIs: a synchronous throw means blocked; otherwise watch the handle.
function attemptAsync(start) {
  return new Promise((resolve) => {
    let handle;
    try {
      handle = start();
    } catch (e) {
      resolve(e.code === 'ERR_ACCESS_DENIED' ? { blocked: true, code: e.code } : { blocked: false, code: e.code ?? e.name });
      return;
    }
    const done = (result) => {
      clearTimeout(timer);
      try { handle.kill ? handle.kill('SIGKILL') : handle.terminate(); } catch { /* gone */ }
      resolve(result);
    };
    const timer = setTimeout(() => done({ blocked: false, code: 'TIMEOUT' }), 2000);
    handle.once('error', (e) => done(e.code === 'ERR_ACCESS_DENIED' ? { blocked: true, code: e.code } : { blocked: false, code: e.code ?? e.name }));
    handle.once(handle.kill ? 'spawn' : 'online', () => done({ blocked: false, code: 'STARTED' }));
  });
}

async function main() {
  const report = {
    exec_sync: attemptSync(() => cp.execSync('id', { timeout: 2000 })),
    spawn_sync: attemptSync(() => cp.spawnSync('id', [], { timeout: 2000 })),
    spawn: await attemptAsync(() => cp.spawn('id')),
    exec_file: await attemptAsync(() => cp.execFile('id', { timeout: 2000 }, () => {})),
    fork: await attemptAsync(() => cp.fork(path.join(__dirname, 'child.js'))),
    worker: await attemptAsync(() => new Worker(path.join(__dirname, 'child.js'))),
    binding_spawn_sync: attemptSync(() => process.binding('spawn_sync')),
  };
  process.stdout.write(JSON.stringify(report));
  process.exit(0); // leave nothing behind, whatever happened
}

main();
