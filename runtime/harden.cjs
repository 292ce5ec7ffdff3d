// Loaded by the runner before every tool (`node --require`), inside the sandbox.
// `--disallow-code-generation-from-strings` stops eval and Function; this closes the other
// routes by which a tool could hand V8 code that is not in its scanned files. It is a
// seat belt like Node's permission model: the OS sandbox stays the boundary.
'use strict';

const Module = require('module');
const fs = require('fs');
const vm = require('vm');
const v8 = require('v8');

const SKILL = '/skill/';

function denied(what) {
  return function disabled() {
    const e = new Error(
      `${what} is disabled in the skill sandbox: a tool runs only the code in its own files`,
    );
    e.code = 'ERR_SKILL_SANDBOX';
    throw e;
  };
}

function lock(obj, name, value) {
  Object.defineProperty(obj, name, {
    value,
    writable: false,
    configurable: false,
    enumerable: true,
  });
}

// 1. vm compiles strings in this or new contexts (new contexts allow eval by default).
//    Builtins share this exports object, so repl and others lose it too.
for (const name of Object.keys(vm)) {
  if (name !== 'constants') lock(vm, name, denied(`vm.${name}`));
}
Object.freeze(vm);

// 2. The CommonJS loader: only a file's own bytes, from /skill, under the original wrapper.
const compile = Module.prototype._compile;
const wrap = Module.wrap;
const wrapper = Module.wrapper;
const wrapperText = [wrapper[0], wrapper[1]];
function stripBom(s) {
  return s.charCodeAt(0) === 0xfeff ? s.slice(1) : s;
}
lock(Module.prototype, '_compile', function guardedCompile(content, filename, ...rest) {
  if (
    Module.wrap !== wrap ||
    Module.wrapper !== wrapper ||
    wrapper[0] !== wrapperText[0] ||
    wrapper[1] !== wrapperText[1]
  ) {
    denied('changing Module.wrap or Module.wrapper')();
  }
  if (typeof filename !== 'string' || !filename.startsWith(SKILL)) {
    denied(`compiling ${String(filename).slice(0, 80)}`)();
  }
  let onDisk;
  try {
    onDisk = fs.readFileSync(filename, 'utf8');
  } catch {
    denied(`compiling ${filename.slice(0, 80)}, which is not a file`)();
  }
  if (typeof content !== 'string' || (content !== onDisk && content !== stripBom(onDisk))) {
    denied('compiling source that is not the file\'s own')();
  }
  return compile.call(this, content, filename, ...rest);
});

// 3. The ES module loader: only node: builtins and files under /skill; no data: or
//    other URLs, and no hooks of the tool's own. (Node 20 has no synchronous hooks.)
if (typeof Module.registerHooks === 'function') Module.registerHooks({
  resolve(specifier, context, next) {
    const r = next(specifier, context);
    if (!(r.url.startsWith('node:') || r.url.startsWith(`file://${SKILL}`))) {
      denied(`importing ${r.url.slice(0, 80)}`)();
    }
    return r;
  },
  load(url, context, next) {
    if (!(url.startsWith('node:') || url.startsWith(`file://${SKILL}`))) {
      denied(`loading ${url.slice(0, 80)}`)();
    }
    return next(url, context);
  },
});
lock(Module, 'registerHooks', denied('module.registerHooks'));
lock(Module, 'register', denied('module.register'));

// 4. WebAssembly compiles bytes a tool could make at run time.
const wasm = {};
for (const name of Object.getOwnPropertyNames(WebAssembly)) {
  const v = WebAssembly[name];
  wasm[name] = typeof v === 'function' ? denied(`WebAssembly.${name}`) : v;
}
Object.freeze(wasm);
Object.defineProperty(globalThis, 'WebAssembly', {
  value: wasm,
  writable: false,
  configurable: false,
  enumerable: false,
});

// 5. V8 flags set at run time could loosen the checks above for code compiled later.
lock(v8, 'setFlagsFromString', denied('v8.setFlagsFromString'));
