// Loaded by the runner before every tool (`node --require`), inside the sandbox.
// `--disallow-code-generation-from-strings` stops eval and Function; this closes the other
// routes by which a tool could hand V8 code that is not in its scanned files. It is a
// seat belt like Node's permission model: the OS sandbox stays the boundary.
'use strict';

const Module = require('module');
const fs = require('fs');

// What the guards below use, taken now: a tool that later patches fs.readFileSync,
// String.prototype.startsWith or Function.prototype.call changes nothing for them.
const uncurry = Function.prototype.call.bind(Function.prototype.bind, Function.prototype.call);
const readFileSync = fs.readFileSync;
const apply = Reflect.apply;
const defineProperty = Object.defineProperty;
const startsWith = uncurry(String.prototype.startsWith);
const endsWith = uncurry(String.prototype.endsWith);
const indexOf = uncurry(String.prototype.indexOf);
const charCodeAt = uncurry(String.prototype.charCodeAt);
const stringSlice = uncurry(String.prototype.slice);
const ErrorCtor = Error;

const SKILL = '/skill/';
const SKILL_URL = 'file:///skill/';
// CommonJS compiles any other extension as JavaScript; only these are code.
const CODE_EXTENSIONS = ['.js', '.cjs'];
// What the ES module loader may read from /skill: code and JSON data.
const MODULE_EXTENSIONS = ['.js', '.mjs', '.cjs', '.json'];

function hasExtension(name, list) {
  for (let i = 0; i < list.length; i++) {
    if (endsWith(name, list[i])) return true;
  }
  return false;
}

// A path under /skill as Node's loader makes them (absolute and normalised): a path with
// `.` or `..` segments or an empty one starts with /skill/ and may still lead out of it
// (`/skill/../runtime/harden.cjs`, the one file outside /skill the job may read).
function underSkill(path) {
  return typeof path === 'string' &&
    startsWith(path, SKILL) &&
    indexOf(path, '/./') === -1 &&
    indexOf(path, '/../') === -1 &&
    indexOf(path, '//') === -1 &&
    !endsWith(path, '/.') &&
    !endsWith(path, '/..');
}

function denied(what) {
  return function disabled() {
    const e = new ErrorCtor(
      `${what} is disabled in the skill sandbox: a tool runs only the code in its own files`,
    );
    e.code = 'ERR_SKILL_SANDBOX';
    throw e;
  };
}

function lock(obj, name, value) {
  defineProperty(obj, name, {
    value,
    writable: false,
    configurable: false,
    enumerable: true,
  });
}

// 1. vm compiles strings in this or new contexts (new contexts allow eval by default).
//    Builtins share this exports object, so repl and node:test (its snapshots run a file
//    through vm.runInContext) lose it too. It is locked before the tool runs (below).
const getBuiltinModule = process.getBuiltinModule;
const objectKeys = Object.keys;
const freeze = Object.freeze;
function lockVm() {
  // From Node itself, not through require: a tool may have replaced Module._load or
  // Module.prototype.require to hand this a decoy. (Without getBuiltinModule this runs
  // before the tool.)
  const vm = typeof getBuiltinModule === 'function'
    ? apply(getBuiltinModule, process, ['vm'])
    : require('vm');
  const names = objectKeys(vm);
  for (let i = 0; i < names.length; i++) {
    if (names[i] !== 'constants') lock(vm, names[i], denied(`vm.${names[i]}`));
  }
  freeze(vm);
}

// 2. The CommonJS loader: only a file's own bytes, from /skill, under the original wrapper.
const compile = Module.prototype._compile;
const wrap = Module.wrap;
const wrapper = Module.wrapper;
const wrapperText = [wrapper[0], wrapper[1]];
const ownDescriptor = Object.getOwnPropertyDescriptor;
const hasOwn = Object.hasOwn;
// Each part of the wrapper is still its own data property holding the original text: a
// getter could give this check the original and Node's wrap, which reads it again, the
// tool's own. The descriptor's own `value`: `'value' in d` would find one the tool put on
// Object.prototype beside its getter.
function wrapperIntact() {
  for (let i = 0; i < 2; i++) {
    const d = ownDescriptor(wrapper, i);
    if (d === undefined || !hasOwn(d, 'value') || d.value !== wrapperText[i]) return false;
  }
  return true;
}
// The formats under which Node compiles a file as it is: another (its TypeScript ones)
// would compile what type stripping makes of the file, not the file's own JavaScript.
function ownFormat(format) {
  return format === undefined || format === 'commonjs' || format === 'module';
}
function stripBom(s) {
  return charCodeAt(s, 0) === 0xfeff ? stringSlice(s, 1) : s;
}
lock(Module.prototype, '_compile', function guardedCompile(content, filename, format) {
  if (!underSkill(filename)) {
    denied('compiling a file outside /skill')();
  }
  if (!hasExtension(filename, CODE_EXTENSIONS)) {
    denied('compiling a file that is not .js or .cjs as code')();
  }
  if (!ownFormat(format)) {
    denied('compiling a file under another format than its own')();
  }
  let onDisk;
  try {
    onDisk = readFileSync(filename, 'utf8');
  } catch {
    denied('compiling a path that is not a file')();
  }
  if (typeof content !== 'string' || (content !== onDisk && content !== stripBom(onDisk))) {
    denied('compiling source that is not the file\'s own')();
  }
  // The wrapper last, right before the compile: reading the file runs code of the tool's
  // (Node's readFileSync reads properties of objects whose prototype the tool shapes), which
  // could change the wrapper after an earlier look. From here to Node's wrap nothing of the
  // tool's runs.
  if (
    Module.wrap !== wrap ||
    Module.wrapper !== wrapper ||
    !wrapperIntact()
  ) {
    denied('changing Module.wrap or Module.wrapper')();
  }
  // No spread: it would ask the array iterator, which the tool can replace.
  return apply(compile, this, format === undefined ? [content, filename] : [content, filename, format]);
});

// 3. The ES module loader: only node: builtins and files under /skill; no data: or
//    other URLs, and no hooks of the tool's own. (Node 20 has no synchronous hooks.)
//    Node takes a module's type from the URL's path, never from its query or fragment,
//    so the extension is judged on the path, and a /skill URL with a query or fragment
//    is refused outright: in a "type": "module" package `file:///skill/notes?x.js` would
//    run `notes`, a file that is not code.
function refusal(url) {
  if (typeof url !== 'string') return 'importing anything but node: builtins and /skill files';
  if (startsWith(url, 'node:')) return null;
  if (!startsWith(url, SKILL_URL)) return 'importing anything but node: builtins and /skill files';
  if (indexOf(url, '?') !== -1 || indexOf(url, '#') !== -1) {
    return 'importing a /skill URL with a query or fragment';
  }
  if (!hasExtension(url, MODULE_EXTENSIONS)) {
    return 'importing a /skill file that is not .js, .mjs, .cjs or .json';
  }
  return null;
}
// 6. Host-wide figures. sysinfo(2) is not namespaced: os.totalmem, os.freemem,
//    os.loadavg, os.uptime and process.availableMemory would give the host's memory, load
//    and uptime. The job sees its own instead: its memory limit (set by the runner's last
//    line of this file, jobMemBytes), what is left of it, no load, its own age. A seat
//    belt: native code could still call sysinfo; these figures are not secrets, only
//    the host's fingerprint. process.hrtime counts from the start of the job's time
//    namespace (the runner's, where the kernel has them), not from the host's boot.
let jobMemBytes = 0;
const memoryRss = process.memoryUsage.rss;
const processUptime = process.uptime;
const mathFloor = Math.floor;
function ownTotal() {
  return jobMemBytes;
}
function ownFree() {
  const left = jobMemBytes - apply(memoryRss, process.memoryUsage, []);
  return left > 0 ? left : 0;
}
function lockOs() {
  const os = typeof getBuiltinModule === 'function'
    ? apply(getBuiltinModule, process, ['os'])
    : require('os');
  lock(os, 'totalmem', function totalmem() { return ownTotal(); });
  lock(os, 'freemem', function freemem() { return ownFree(); });
  lock(os, 'loadavg', function loadavg() { return [0, 0, 0]; });
  lock(os, 'uptime', function uptime() { return mathFloor(apply(processUptime, process, [])); });
}
lock(process, 'constrainedMemory', function constrainedMemory() { return ownTotal(); });
lock(process, 'availableMemory', function availableMemory() { return ownFree(); });

// 5. V8 flags set at run time could loosen the checks above for code compiled later.
function lockV8() {
  // From the copy of getBuiltinModule taken at start, never through require: a tool may
  // have replaced Module.prototype.require to hand this a decoy to lock instead.
  const v8 = typeof getBuiltinModule === 'function'
    ? apply(getBuiltinModule, process, ['v8'])
    : require('v8');
  lock(v8, 'setFlagsFromString', denied('v8.setFlagsFromString'));
}
// vm, v8 and os are locked now, before any code of the tool: every way to a builtin
// (require and its hooks, process.getBuiltinModule, Module._load's internal options,
// which skip the hooks) then finds them locked. Locking them on first use left that last
// way open, and a lock a polluted Object.prototype made throw left its module open for
// good. It costs a cold job about 2.5 ms (loading v8 and os); a warm sandbox pays it
// while it waits.
lockOs();
lockV8();
lockVm();
if (typeof Module.registerHooks === 'function') Module.registerHooks({
  resolve(specifier, context, next) {
    const r = next(specifier, context);
    const refused = refusal(r.url);
    if (refused !== null) denied(refused)();
    return r;
  },
  load(url, context, next) {
    const refused = refusal(url);
    if (refused !== null) denied(refused)();
    return next(url, context);
  },
});
lock(Module, 'registerHooks', denied('module.registerHooks'));
lock(Module, 'register', denied('module.register'));

// 4. WebAssembly compiles bytes a tool could make at run time. Only modules the runtime
//    itself ships may compile: undici (fetch) parses HTTP with llhttp built to WebAssembly.
//    They are known by the sha256 of their bytes, one list per pinned Node version.
const ALLOWED_WASM = {
  // Node v24.22.3: undici 7.30.2, llhttp 9.4.4.
  'v24.22.3': ['2434215e1f7fa0163f22ce895ddbeb83984fa0aa51e123164e053213e5aca028'],
};
const allowedWasm = ALLOWED_WASM[process.version] || [];
const RealModule = WebAssembly.Module;
const construct = Reflect.construct;
const Uint8ArrayCtor = Uint8Array;
const Uint32ArrayCtor = Uint32Array;
const typedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
const getter = (proto, name) => uncurry(Object.getOwnPropertyDescriptor(proto, name).get);
const viewBuffer = getter(typedArrayProto, 'buffer');
const viewOffset = getter(typedArrayProto, 'byteOffset');
const viewLength = getter(typedArrayProto, 'byteLength');
const bufferLength = getter(ArrayBuffer.prototype, 'byteLength');
const DataViewCtor = DataView;
const ArrayBufferCtor = ArrayBuffer;
const isView = ArrayBuffer.isView;
const numberToString = uncurry(Number.prototype.toString);
const padStart = uncurry(String.prototype.padStart);

// A private copy of the bytes, so that what is hashed is what compiles. Made by the
// constructor and copied byte by byte: `slice` would ask the species of the tool's choosing
// for the copy, and the tool would keep it (and change it between the hash and the compile).
function copyOf(source) {
  let view;
  if (isView(source) && !(source instanceof DataViewCtor)) {
    view = new Uint8ArrayCtor(viewBuffer(source), viewOffset(source), viewLength(source));
  } else if (source instanceof ArrayBufferCtor) {
    view = new Uint8ArrayCtor(source, 0, bufferLength(source));
  } else {
    return null;
  }
  const n = viewLength(view);
  const copy = new Uint8ArrayCtor(n);
  for (let i = 0; i < n; i++) copy[i] = view[i];
  return copy;
}

const K = new Uint32ArrayCtor([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// SHA-256 (FIPS 180-4) of a Uint8Array, as lowercase hex. Plain arithmetic on typed arrays:
// nothing a tool can patch is called (not `length`, which a tool can redefine on the
// prototype, nor `Math.floor`).
function sha256hex(bytes) {
  const n = viewLength(bytes);
  const blocks = ((n + 8) >>> 6) + 1;
  const m = new Uint8ArrayCtor(blocks * 64);
  for (let i = 0; i < n; i++) m[i] = bytes[i];
  m[n] = 0x80;
  const bits = n * 8;
  const hi = mathFloor(bits / 0x100000000);
  const end = blocks * 64;
  m[end - 8] = hi >>> 24; m[end - 7] = hi >>> 16; m[end - 6] = hi >>> 8; m[end - 5] = hi;
  m[end - 4] = bits >>> 24; m[end - 3] = bits >>> 16; m[end - 2] = bits >>> 8; m[end - 1] = bits;
  const h = new Uint32ArrayCtor([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32ArrayCtor(64);
  for (let b = 0; b < end; b += 64) {
    for (let t = 0; t < 16; t++) {
      const j = b + t * 4;
      w[t] = (m[j] << 24) | (m[j + 1] << 16) | (m[j + 2] << 8) | m[j + 3];
    }
    for (let t = 16; t < 64; t++) {
      const x = w[t - 15], y = w[t - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    let a = h[0], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7], bb = h[1];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (k + S1 + ch + K[t] + w[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & bb) ^ (a & c) ^ (bb & c);
      const t2 = (S0 + maj) | 0;
      k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
  }
  let hex = '';
  for (let i = 0; i < 8; i++) hex += padStart(numberToString(h[i], 16), 8, '0');
  return hex;
}

function allowedModuleBytes(source) {
  const bytes = copyOf(source);
  if (bytes === null) return null;
  const digest = sha256hex(bytes);
  for (let i = 0; i < allowedWasm.length; i++) {
    if (allowedWasm[i] === digest) return bytes;
  }
  return null;
}

function GuardedModule(source) {
  if (new.target === undefined) denied('calling WebAssembly.Module without new')();
  const bytes = allowedModuleBytes(source);
  if (bytes === null) denied('WebAssembly.Module of bytes that are not the runtime\'s own')();
  return construct(RealModule, [bytes]);
}
// An allowed module's prototype must not lead back to the real constructor.
defineProperty(RealModule.prototype, 'constructor', {
  value: GuardedModule,
  writable: false,
  configurable: false,
  enumerable: false,
});
GuardedModule.prototype = RealModule.prototype;

const wasm = {};
for (const name of Object.getOwnPropertyNames(WebAssembly)) {
  const v = WebAssembly[name];
  if (name === 'Module') wasm[name] = GuardedModule;
  // Instance only instantiates a module, and only the guard above makes modules.
  else if (name === 'Instance') wasm[name] = v;
  else wasm[name] = typeof v === 'function' ? denied(`WebAssembly.${name}`) : v;
}
Object.freeze(wasm);
Object.defineProperty(globalThis, 'WebAssembly', {
  value: wasm,
  writable: false,
  configurable: false,
  enumerable: false,
});

// For the runner's tests of this file (never set inside the sandbox).
if (process.env.OVSR_HARDEN_SELFTEST === '1') {
  module.exports = { sha256hex };
}

// 7. The gate. For a job with a root of its own the runner adds a call to this after the
//    line below: Node waits here, every layer and all of this file in place, for the
//    runner's go byte on stdin, which comes right before the job's input. A warm sandbox
//    waits here until a job comes (pid 1 lays its files meanwhile); a cold job finds the
//    byte already there. Node's main script, /runtime/main, is a link laid with the files
//    that leads to the entry; process.argv names the entry itself. At the gate the preload
//    says so on stderr (GATE_RECORD, which the runner takes off the stream): a warm
//    sandbox is ready only then, its Node's start done, none of it left to a job's clocks.
const MAIN_LINK = '/runtime/main';
const GO_BYTE = 10;
const GATE_RECORD = '\u0000openvibe-skill-runner:gate\n';
const readSync = fs.readSync;
const realpathSync = fs.realpathSync;
function waitAtGate() {
  // What every tool uses next, compiled before the gate rather than after it: its input
  // comes on a pipe (stdin is a net.Socket over streams), its answer goes to one. A warm
  // sandbox has this done before its job comes; a cold job would do it right after. Only
  // the modules: process.stdout itself would open a descriptor the tool would see first.
  require('stream');
  require('net');
  writeSync(2, GATE_RECORD);
  const one = new Uint8Array(1);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    let n;
    try {
      n = readSync(0, one, 0, 1, null);
    } catch (e) {
      // A descriptor left non-blocking: wait a little and read again.
      if (e && e.code === 'EAGAIN') {
        Atomics.wait(nap, 0, 0, 1);
        continue;
      }
      throw e;
    }
    // The runner gave up on this sandbox before its job came: nothing to run.
    if (n === 0) process.exit(0);
    break;
  }
  if (one[0] !== GO_BYTE) {
    throw new ErrorCtor('the runner opened the gate with an unexpected byte; refusing to run');
  }
  process.argv[1] = realpathSync(MAIN_LINK);
  reportTheEnd();
}

// 8. The end. Once Node has run the last 'exit' listener the tool has written all it ever
//    will: at a natural end the event loop ran until no write to stdout or stderr was
//    pending, and after process.exit() a write still pending is never done, with the
//    record or without it (a write that fits in the pipe is done at once). What Node does after
//    that (freeing its environment and heap, then the kernel freeing its memory) only
//    delays the runner, so the preload tells it the exit code at once, in a record at the
//    end of stderr that the runner takes off the stream (`supervise::END_RECORD`), and
//    exits with that code as process.exit() does. Not after an uncaught exception (Node
//    prints it after the 'exit' listeners) nor when a listener ends Node itself: the
//    runner then waits for Node's end as before. A tool that writes the record itself
//    ends its own job, which it could do with process.exit().
const END_RECORD = '\u0000openvibe-skill-runner:end:';
const writeSync = fs.writeSync;
const reallyExit = process.reallyExit;
function reportTheEnd() {
  const emit = process.emit;
  let fatal = false;
  defineProperty(process, 'emit', {
    value: function emitThenEnd(type) {
      // Emitted before the 'uncaughtException' listeners, which may still handle it.
      if (type === 'uncaughtExceptionMonitor') fatal = true;
      // The arguments as they came: a spread would ask the array iterator, which the tool
      // can replace.
      const handled = apply(emit, this, arguments);
      if (type === 'uncaughtException' && handled) fatal = false;
      if (type === 'exit' && !fatal && process._exiting === true) {
        // The code Node ends with: process.exitCode when set, else the one emitted.
        const set = process.exitCode;
        const code = (set === undefined || set === null ? arguments[1] : set) & 0xff;
        try {
          writeSync(2, `${END_RECORD}${code}\n`);
        } catch {
          // stderr closed or full: the runner waits for Node's end instead.
          return handled;
        }
        reallyExit(code);
      }
      return handled;
    },
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

// The runner appends one line after this one: `jobMemBytes = <the job's mem_bytes>;`.
