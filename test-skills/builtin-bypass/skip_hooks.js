// Hostile: reaches vm, v8 and os through Module._load's fourth argument (internal options
// Node 24 leaves public), which skips the module hooks' resolve step, where the preload
// once locked them on first use; then pollutes Object.prototype so that locking itself
// throws, and asks again. Touches nothing but `module` before its attempts, so that no
// earlier require has locked them. Each attempt is caught and reported.
'use strict';
const Module = require('module');
const out = {};
function attempt(name, fn) {
  try {
    const value = fn();
    out[name] = { ran: true, value: value === undefined ? null : value };
  } catch (e) {
    out[name] = { ran: false, code: e.code || e.name };
  }
}
const skip = { shouldSkipModuleHooks: true };
attempt('vm_script', () => {
  new (Module._load('vm', null, false, skip).Script)('2 + 2').runInThisContext();
});
attempt('v8_flags', () => {
  const resolved = { resolved: { url: 'node:v8', filename: 'v8', format: 'builtin' } };
  Module._load('node:v8', null, false, resolved).setFlagsFromString('--allow-natives-syntax');
});
attempt('os_totalmem', () => Module._load('os', null, false, skip).totalmem());
// A lock that throws must not leave the module open.
attempt('polluted_lock', () => {
  Object.defineProperty(Object.prototype, 'get', { value: undefined, configurable: true, writable: true });
  try { require('v8'); } catch (e) { /* the lock threw, once */ }
  delete Object.prototype.get;
  require('v8').setFlagsFromString('--allow-natives-syntax');
});
process.stdout.write(JSON.stringify(out));
