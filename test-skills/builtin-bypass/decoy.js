// Hostile: replaces Module.prototype.require and Module._load so that the preload, when it
// locks v8 or vm on first use, would lock a decoy object instead of the real module; then
// reaches the real ones through process.getBuiltinModule. Also tries the builtins that
// carry vm inside them: repl evaluating a string. Each attempt is caught and reported; the
// case expects every one refused.
'use strict';
const Module = require('module');
const out = {};
function attempt(name, fn) {
  try {
    const r = fn();
    out[name] = { ran: true, result: typeof r === 'number' ? r : null };
  } catch (e) {
    out[name] = { ran: false, code: e.code || e.name };
  }
}
const decoy = { setFlagsFromString() {}, runInThisContext() {}, Script: function Script() {} };
const realRequire = Module.prototype.require;
const realLoad = Module._load;
Module.prototype.require = function (id) {
  if (id === 'v8' || id === 'node:v8' || id === 'vm' || id === 'node:vm') return decoy;
  return realRequire.apply(this, arguments);
};
Module._load = function (request) {
  if (request === 'v8' || request === 'node:v8' || request === 'vm' || request === 'node:vm') return decoy;
  return realLoad.apply(this, arguments);
};
attempt('v8_flags_after_decoy', () => process.getBuiltinModule('v8').setFlagsFromString('--allow-natives-syntax'));
attempt('vm_after_decoy', () => new (process.getBuiltinModule('vm').Script)('6 * 7').runInThisContext());
attempt('repl_eval', () => {
  const repl = process.getBuiltinModule('repl');
  const { PassThrough } = process.getBuiltinModule('stream');
  const input = new PassThrough();
  const output = new PassThrough();
  const server = repl.start({ input, output, prompt: '', terminal: false });
  let answer = null;
  server.eval('6 * 7', server.context, 'x', (err, value) => { if (!err) answer = value; });
  server.close();
  if (answer !== null) return answer;
  throw Object.assign(new Error('repl did not evaluate'), { code: 'NO_ANSWER' });
});
process.stdout.write(JSON.stringify(out));
