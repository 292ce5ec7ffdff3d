'use strict';
// HOSTILE (do not run outside the sandbox). Routes from a string to running code in the
// main context that must stay closed (--disallow-code-generation-from-strings and
// --permission). The routes that still run are in the codegen-routes skill.
//   every Function constructor (plain, generator, async, async generator) -> EvalError,
//     also the main context's one reached from inside a vm context
//   setTimeout/setInterval with a string (browsers eval it; Node refuses the type)
//   v8.setFlagsFromString('--no-disallow-code-generation-from-strings') at run time does
//     not reopen eval in the main context (whether the flip itself is refused or not)
//   module.register (loader hooks on their own thread) and inspector Session
//     (Runtime.evaluate) -> ERR_ACCESS_DENIED, or the runner's own guard; vm.SourceTextModule
//     and ShadowRealm are absent without their flags; process.binding('contextify') is refused
// Where the runner preloads its runtime guards, a refusal may come from them
// (ERR_SKILL_SANDBOX) rather than from V8 or Node: the case records which.
const vm = require('vm');
const Module = require('module');

function attempt(run) {
  try {
    run();
    return { ran: true };
  } catch (e) {
    return { ran: false, error: e.code ?? e.name };
  }
}

const report = {
  eval_indirect: attempt(() => (0, eval)('1 + 1')),
  function_ctor: attempt(() => new Function('return 1')()),
  generator_function_ctor: attempt(() => (function* () {}).constructor('yield 1')().next()),
  async_function_ctor: attempt(() => (async function () {}).constructor('return 1')),
  async_generator_function_ctor: attempt(() => (async function* () {}).constructor('yield 1')),
  function_ctor_via_bind: attempt(() => Function.prototype.constructor.bind(null, 'return 1')()()),
  // From inside a vm context, the main context's Function is still the main context's:
  // the classic this.constructor.constructor walk, and a function handed in.
  vm_reaching_main_function: attempt(() => vm.runInNewContext('this.constructor.constructor("return process")()')),
  vm_passed_function_ctor: attempt(() => vm.runInNewContext('f.constructor("return 1")()', { f: () => {} })),
  // A context made with codeGeneration.strings false refuses eval (by default vm contexts
  // allow it: see codegen-routes).
  vm_context_strings_false: attempt(() => vm.runInContext('eval("1 + 1")', vm.createContext({}, { codeGeneration: { strings: false } }))),
  set_timeout_string: attempt(() => setTimeout('globalThis.ran = true', 0)),
  set_interval_string: attempt(() => setInterval('globalThis.ran = true', 1000)),
};
attempt(() => require('v8').setFlagsFromString('--no-disallow-code-generation-from-strings'));
report.eval_after_v8_flag_flip = attempt(() => (0, eval)('1 + 1'));
report.module_register_data_url = attempt(() => Module.register('data:text/javascript,export async function load(u, c, n) { return n(u, c); }'));
report.inspector_session = attempt(() => { const s = new (require('inspector').Session)(); s.connect(); s.post('Runtime.evaluate', { expression: '1 + 1' }); });
report.process_binding_contextify = attempt(() => process.binding('contextify'));
report.vm_source_text_module = typeof vm.SourceTextModule;
report.shadow_realm = typeof globalThis.ShadowRealm;
process.stdout.write(JSON.stringify(report));
process.exit(0);
