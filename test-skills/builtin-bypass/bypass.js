// Hostile: reaches builtins through process.getBuiltinModule, which skips module hooks,
// to loosen V8 flags, compile strings with vm or Module#_compile. Each attempt is caught
// and reported; the case expects every one refused.
'use strict';
const out = {};
function attempt(name, fn) {
  try {
    fn();
    out[name] = { ran: true };
  } catch (e) {
    out[name] = { ran: false, code: e.code || e.name };
  }
}
const get = process.getBuiltinModule;
attempt('v8_flags', () => get('v8').setFlagsFromString('--allow-natives-syntax'));
attempt('node_v8_flags', () => get('node:v8').setFlagsFromString('--allow-natives-syntax'));
attempt('vm_new_context', () => get('vm').runInNewContext('1 + 1'));
attempt('vm_script', () => new (get('node:vm').Script)('2 + 2').runInThisContext());
attempt('module_compile', () => {
  const M = get('module');
  const m = new M('/skill/x.js');
  m._compile('module.exports = 5', '/skill/bypass.js');
});
attempt('register_hooks', () => get('module').registerHooks({}));
process.stdout.write(JSON.stringify(out));
