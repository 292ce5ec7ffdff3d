'use strict';
// HOSTILE (do not run outside the sandbox). Checks that the runner started Node with the
// flags the spec requires, by trying what they forbid:
//   --disallow-code-generation-from-strings: eval, Function, AsyncFunction -> EvalError
//   --permission: process.binding, native addons (ERR_DLOPEN_DISABLED), WASI, inspector
// (vm.runInNewContext, import('data:...') and WebAssembly are NOT stopped by these flags
// in Node 24; the OS sandbox covers what they could do, so they are not asserted here.)
const path = require('path');

function attempt(run) {
  try {
    run();
    return { blocked: false };
  } catch (e) {
    return { blocked: true, error: e.code ?? e.name };
  }
}

const report = {
  eval: attempt(() => (0, eval)('1 + 1')),
  function_ctor: attempt(() => new Function('return 1')()),
  async_function_ctor: attempt(() => (async function () {}).constructor('return 1')),
  process_binding: attempt(() => process.binding('fs')),
  native_addon: attempt(() => process.dlopen({ exports: {} }, path.join(__dirname, 'addon.node'))),
  wasi: attempt(() => new (require('wasi').WASI)({ version: 'preview1' })),
  inspector: attempt(() => {
    const inspector = require('inspector');
    inspector.open(0, '127.0.0.1');
    inspector.close();
  }),
};
process.stdout.write(JSON.stringify(report));
