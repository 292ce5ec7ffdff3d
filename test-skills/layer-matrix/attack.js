'use strict';
// HOSTILE (never run outside the sandbox). The layer matrix's attacks
// (integration/layers.rs): one per class, each aimed only at something the test made and
// owns, named in the input: a canary file, a canary folder, a canary process, listeners it
// opened, bounded bombs. Each prints what it reached and the error it met; the test judges
// from that and from the host (the folder still empty, the process still alive, no
// connection accepted) whether the attack got through.
const fs = require('fs');
const path = require('path');
const net = require('net');

const MIB = 1024 * 1024;
// A worker of exhaust_pids (started with argv ['idle']) stays until terminated, and never
// reads stdin, which the main thread has read.
const IDLE = process.argv[2] === 'idle';
const input = IDLE ? {} : JSON.parse(fs.readFileSync(0, 'utf8'));

function code(e) {
  return (e && (e.code || e.name)) || String(e);
}

function done(result) {
  process.stdout.write(JSON.stringify({ attack: input.attack, ...result }));
}

// Connects, reads until the listener's token or an error, within 2 s.
function connect(options) {
  return new Promise((resolve) => {
    let data = '';
    let settled = false;
    const finish = (r) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        sock.destroy();
        resolve(r);
      }
    };
    let sock;
    try {
      sock = net.connect(options);
    } catch (e) {
      resolve({ error: code(e) });
      return;
    }
    const timer = setTimeout(() => finish({ error: 'timeout', data }), 2000);
    sock.on('data', (d) => {
      data += d;
      if (data.includes(input.token)) finish({ data });
    });
    sock.on('error', (e) => finish({ error: code(e), data }));
    sock.on('close', () => finish({ error: data ? null : 'closed', data }));
  });
}

// Starts the host's `sleep` (its path and a duration under a minute in the input), with no
// descriptors; resolves with the child once it runs ('spawn'), or the error it met (thrown
// at once, or emitted), or 'timeout' after 5 s (with the child, to be ended).
function startProcess() {
  return new Promise((resolve) => {
    let child;
    try {
      child = require('child_process').spawn(input.sleep_path, [input.sleep_seconds], { stdio: 'ignore' });
    } catch (e) {
      resolve({ error: code(e) });
      return;
    }
    const timer = setTimeout(() => resolve({ child, error: 'timeout' }), 5000);
    child.once('spawn', () => {
      clearTimeout(timer);
      resolve({ child, error: null });
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ error: code(e) });
    });
  });
}

const attacks = {
  // Read a secret file the test wrote on the host (mode 0644: the uid alone does not stop it).
  read_host_file() {
    try {
      done({ content: fs.readFileSync(input.canary_file, 'utf8') });
    } catch (e) {
      done({ error: code(e) });
    }
  },
  // Make a folder in the test's own 0777 canary folder.
  write_anywhere() {
    try {
      fs.mkdirSync(path.join(input.canary_dir, 'written-by-the-job'));
      done({ written: true });
    } catch (e) {
      done({ written: false, error: code(e) });
    }
  },
  // Start another program: Node itself, printing a mark.
  spawn() {
    try {
      const cp = require('child_process');
      const r = cp.spawnSync(process.execPath, ['-e', 'process.stdout.write("spawn-landed")'], {
        timeout: 5000,
        encoding: 'utf8',
      });
      done({ stdout: r.stdout || '', error: r.error ? code(r.error) : null, status: r.status });
    } catch (e) {
      done({ stdout: '', error: code(e) });
    }
  },
  // SIGTERM to the canary process the test started on the host (root, outside the job).
  signal_host_process() {
    try {
      process.kill(input.canary_pid, 'SIGTERM');
      done({ sent: true });
    } catch (e) {
      done({ sent: false, error: code(e) });
    }
  },
  // See the canary process: its command line through /proc.
  see_host_processes() {
    try {
      done({ cmdline: fs.readFileSync(`/proc/${input.canary_pid}/cmdline`, 'latin1') });
    } catch (e) {
      done({ cmdline: '', error: code(e) });
    }
  },
  // A TCP listener the test opened on the host's loopback, from a `deny` job.
  async reach_network() {
    done(await connect({ host: '127.0.0.1', port: input.tcp_port }));
  },
  // An abstract unix socket the test bound in the host's network namespace.
  async reach_abstract_socket() {
    done(await connect({ path: `\0${input.abstract_name}` }));
  },
  // A unix socket file the test bound on the host's tree.
  async reach_unix_socket() {
    done(await connect({ path: input.unix_path }));
  },
  // Memory off the V8 heap, touched, up to a bound far above the job's limit.
  memory_off_heap() {
    const held = [];
    let bytes = 0;
    while (bytes < input.bound_bytes) {
      const b = Buffer.allocUnsafe(16 * MIB);
      b.fill(1);
      held.push(b);
      bytes += b.length;
    }
    done({ bytes, chunks: held.length });
  },
  // Memory on the V8 heap, up to the same bound.
  memory_on_heap() {
    const held = [];
    let bytes = 0;
    while (bytes < input.bound_bytes) {
      const a = new Array(MIB / 8).fill(0).map((_, i) => i + 0.5);
      held.push(a);
      bytes += MIB;
    }
    done({ bytes, arrays: held.length });
  },
  // Processes and threads up to a bound (input.bound_pids): processes where a first one
  // starts (a host program, `sleep` with a bounded duration, no descriptors, little
  // memory: only the pids limit stops these), else worker threads (which meet the memory
  // limit and the descriptor limit first). Each waited for until it runs, within 5 s; no
  // more started after 12 s; every one ended before the report (and the job's cgroup is
  // killed at its end anyway).
  async exhaust_pids() {
    const deadline = Date.now() + 12000;
    const first = await startProcess();
    if (first.child && !first.error) {
      const children = [first.child];
      let error = null;
      while (children.length < input.bound_pids && Date.now() < deadline) {
        const next = await startProcess();
        if (next.child) children.push(next.child);
        if (next.error) {
          error = next.error;
          break;
        }
      }
      const started = children.length - (error === 'timeout' ? 1 : 0);
      for (const c of children) c.kill('SIGKILL');
      done({ mode: 'processes', started, error });
      return;
    }
    if (first.child) first.child.kill('SIGKILL');
    const { Worker } = require('worker_threads');
    const workers = [];
    let started = 0;
    let error = null;
    while (started < input.bound_pids && error === null && Date.now() < deadline) {
      try {
        const w = new Worker(__filename, {
          argv: ['idle'],
          resourceLimits: { maxOldGenerationSizeMb: 4, maxYoungGenerationSizeMb: 1, stackSizeMb: 1 },
        });
        workers.push(w);
        error = await new Promise((resolve) => {
          w.once('online', () => resolve(null));
          w.once('error', (e) => resolve(code(e)));
          setTimeout(() => resolve('timeout'), 5000);
        });
        if (error === null) started++;
      } catch (e) {
        error = code(e);
      }
    }
    await Promise.all(workers.map((w) => w.terminate().catch(() => {})));
    done({ mode: 'threads', process_error: first.error, started, error });
  },
  // Outlive the wall clock: ignore SIGTERM and spin, for 60 s at most (twice the longest
  // wall clock a job may have): a kill that failed ends the spin anyway, and the cell then
  // reads the tool's own answer instead of limit/wall.
  outlive_wall_clock() {
    process.on('SIGTERM', () => {});
    const end = Date.now() + 60000;
    while (Date.now() < end) { /* spin */ }
    done({ survived: true });
  },
  // The host's identity: its boot id and machine id.
  read_host_identity() {
    const read = {};
    const errors = {};
    for (const p of ['/proc/sys/kernel/random/boot_id', '/etc/machine-id']) {
      try {
        read[p] = fs.readFileSync(p, 'utf8').trim();
      } catch (e) {
        errors[p] = code(e);
      }
    }
    done({ read, error: Object.values(errors).join(',') || null });
  },
};

if (IDLE) {
  setInterval(() => {}, 1000);
} else {
  const attack = attacks[input.attack];
  if (!attack) {
    done({ error: `no attack named ${input.attack}` });
  } else {
    Promise.resolve(attack()).catch((e) => done({ error: code(e) }));
  }
}
