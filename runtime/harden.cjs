// Loaded by the runner before every tool (`node --require`), inside the sandbox.
// `--disallow-code-generation-from-strings` stops eval and Function; this closes the other
// routes by which a tool could hand V8 code that is not in its scanned files. It is a
// seat belt like Node's permission model: the OS sandbox stays the boundary.
'use strict';

const Module = require('module');
const fs = require('fs');
const vm = require('vm');

// What the guards below use, taken now: a tool that later patches fs.readFileSync,
// String.prototype.startsWith or Function.prototype.call changes nothing for them.
const uncurry = Function.prototype.call.bind(Function.prototype.bind, Function.prototype.call);
const readFileSync = fs.readFileSync;
const apply = Reflect.apply;
const defineProperty = Object.defineProperty;
const startsWith = uncurry(String.prototype.startsWith);
const endsWith = uncurry(String.prototype.endsWith);
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
  return charCodeAt(s, 0) === 0xfeff ? stringSlice(s, 1) : s;
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
  if (typeof filename !== 'string' || !startsWith(filename, SKILL)) {
    denied('compiling a file outside /skill')();
  }
  if (!hasExtension(filename, CODE_EXTENSIONS)) {
    denied('compiling a file that is not .js or .cjs as code')();
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
  return apply(compile, this, [content, filename, ...rest]);
});

// 3. The ES module loader: only node: builtins and files under /skill; no data: or
//    other URLs, and no hooks of the tool's own. (Node 20 has no synchronous hooks.)
function allowedUrl(url) {
  if (typeof url !== 'string') return false;
  if (startsWith(url, 'node:')) return true;
  return startsWith(url, SKILL_URL) && hasExtension(url, MODULE_EXTENSIONS);
}
// 5. V8 flags set at run time could loosen the checks above for code compiled later.
//    The v8 module is large: it is locked when a tool first asks for it.
let v8Locked = false;
function lockV8() {
  v8Locked = true;
  lock(require('v8'), 'setFlagsFromString', denied('v8.setFlagsFromString'));
}
if (typeof Module.registerHooks === 'function') Module.registerHooks({
  resolve(specifier, context, next) {
    const r = next(specifier, context);
    if (!allowedUrl(r.url)) denied('importing anything but node: builtins and /skill files')();
    if (!v8Locked && r.url === 'node:v8') lockV8();
    return r;
  },
  load(url, context, next) {
    if (!allowedUrl(url)) denied('loading anything but node: builtins and /skill files')();
    return next(url, context);
  },
});
else lockV8();
// process.getBuiltinModule reaches builtins without the hooks above.
if (typeof process.getBuiltinModule === 'function') {
  const getBuiltinModule = process.getBuiltinModule;
  lock(process, 'getBuiltinModule', function guardedGetBuiltinModule(id) {
    if (!v8Locked && (id === 'v8' || id === 'node:v8')) lockV8();
    return apply(getBuiltinModule, process, [id]);
  });
}
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

