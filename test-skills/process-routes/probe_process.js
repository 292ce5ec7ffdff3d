'use strict';
// HOSTILE (do not run outside the sandbox). Tries the ways to start code outside this
// thread that the spawn skill does not: process.execve (Node 24), child_process with a
// shell, workers from a string, a data: URL or with a SharedArrayBuffer (an Atomics thread
// bomb), and signals: process._debugProcess (SIGUSR1, which would start an inspector) and
// SIGKILL/SIGSTOP to pid 1.
//
// Safety: the execve target is Node itself with --version (it would print a version and
// exit, failing the case with bad_output); the shell command is `id`. Signals other than 0
// are sent only when the tool is in its own pid namespace (pid <= 8) under a uid that is
// not root; otherwise it refuses and reports {"refused_to_signal": ...}, failing the case.
// Pid 1 there is the runner's tiny init, owned by root: every signal must fail with EPERM.
// kill(-1, SIGKILL) reaches every process of the namespace but pid 1 and the caller: ESRCH,
// there is none.
const cp = require('child_process');
const fs = require('fs');
const path = require('path');

function attempt(run) {
  try {
    run();
    return { blocked: false };
  } catch (e) {
    return { blocked: true, code: e.code ?? e.name };
  }
}

function startWorker(make) {
  let w;
  try {
    w = make();
  } catch (e) {
    return { started: false, code: e.code ?? e.name };
  }
  w.terminate();
  return { started: true };
}

const groups = {
  exec: async () => ({
    execve_node_version: attempt(() => process.execve(process.execPath, [process.execPath, '--version'])),
    execve_bin_sh: attempt(() => process.execve('/bin/sh', ['/bin/sh', '-c', 'id'])),
    spawn_sync_shell_true: attempt(() => cp.spawnSync('id', { shell: true, timeout: 2000 })),
    exec_sync_bin_sh: attempt(() => cp.execSync('id', { shell: '/bin/sh', timeout: 2000 })),
    exec_shell: attempt(() => cp.exec('id', { timeout: 2000 }, () => {}).kill('SIGKILL')),
    exec_file_node: attempt(() => cp.execFileSync(process.execPath, ['--version'], { timeout: 2000 })),
    // A child that would grant itself what this process lacks.
    fork_granting_itself: attempt(() => cp.fork(path.join(__dirname, 'idle.js'), { execArgv: ['--allow-child-process', '--allow-fs-write=*'] }).kill('SIGKILL')),
  }),
  workers: async () => {
    const { Worker } = require('worker_threads');
    const r = {
      eval_true: startWorker(() => new Worker('process.exit(0)', { eval: true })),
      data_url: startWorker(() => new Worker(new URL('data:text/javascript,process.exit(0)'))),
      file_url: startWorker(() => new Worker(new URL(`file://${path.join(__dirname, 'idle.js')}`))),
    };
    // The Atomics thread bomb: 32 workers that would each block on a shared buffer.
    const ATTEMPTS = 32;
    const sab = new SharedArrayBuffer(4);
    const codes = new Set();
    let started = 0;
    for (let i = 0; i < ATTEMPTS; i++) {
      const one = startWorker(() => new Worker(path.join(__dirname, 'idle.js'), { workerData: sab }));
      if (one.started) started++; else codes.add(one.code);
    }
    r.atomics_bomb = { attempts: ATTEMPTS, started, codes: [...codes].sort() };
    // The main thread itself may wait on shared memory (bounded): that is not a new thread.
    r.main_thread_atomics_wait = Atomics.wait(new Int32Array(sab), 0, 0, 10);
    return r;
  },
  signals: async () => {
    const uid = process.getuid();
    // Only where the pid namespace holds: this is pid 2 of its own, its parent the job's
    // pid 1, and no other process answers (a small pid alone is no proof in a container).
    const alone = (() => { try { process.kill(-1, 0); return false; } catch (e) { return e.code === 'ESRCH'; } })();
    if (!(process.pid === 2 && process.ppid === 1 && uid !== 0 && alone)) {
      return { refused_to_signal: { pid: process.pid, uid } };
    }
    const r = {
      in_own_pid_namespace: true,
      parent_is_pid_1: process.ppid === 1,
      debug_process_pid_1: attempt(() => process._debugProcess(1)),
      kill_pid_1_sigkill: attempt(() => process.kill(1, 'SIGKILL')),
      kill_pid_1_sigstop: attempt(() => process.kill(1, 'SIGSTOP')),
      kill_pid_1_sigterm: attempt(() => process.kill(1, 'SIGTERM')),
      kill_all_sigkill: attempt(() => process.kill(-1, 'SIGKILL')),
      // SIGUSR1 to itself asks Node to start the inspector. Sending it is allowed (it is its
      // own process); what must not happen is an inspector: no listener, no url, nothing
      // on stderr.
      debug_process_self: attempt(() => process._debugProcess(process.pid)),
    };
    await new Promise((resolve) => setTimeout(resolve, 500));
    r.inspector_url_after = require('inspector').url() ?? null;
    return r;
  },
};

async function main() {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const run = groups[input.group];
  if (!run) throw new Error(`unknown group ${input.group}`);
  process.stdout.write(JSON.stringify(await run()));
  process.exit(0); // leave nothing behind, whatever happened
}

main();
