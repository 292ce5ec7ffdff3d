'use strict';
// HOSTILE (do not run outside the sandbox). Uses the module loaders to read files outside
// /skill, and reaches for what lies under the public API: process.binding, internalBinding,
// _linkedBinding, internal modules, native addons, SQLite extensions, loader hooks.
// Reports only the error code of each attempt, never a module's content.
//
// Why the codes prove something: Node's module resolution looks at the file system without
// the permission model (it stats the candidate), and only the read is checked. So a file
// that exists in the job's root (/etc/ld.so.cache, the Node binary, /proc/self/status) is
// found and then refused (ERR_ACCESS_DENIED), while a host file (/etc/passwd) is not even
// there (MODULE_NOT_FOUND): that row proves the minimal root, the others the permission model.
const fs = require('fs');
const Module = require('module');

function attempt(run) {
  try {
    run();
    return { loaded: true };
  } catch (e) {
    return { loaded: false, code: e.code ?? e.name };
  }
}

// As attempt, with the refusal's message (the runner's guards name what they refused).
function refusal(run) {
  try {
    run();
    return { loaded: true };
  } catch (e) {
    return { loaded: false, code: e.code ?? e.name, message: String(e.message).slice(0, 120) };
  }
}

async function attemptAsync(run) {
  try {
    await run();
    return { loaded: true };
  } catch (e) {
    return { loaded: false, code: e.code ?? e.name };
  }
}

const groups = {
  require: async () => ({
    etc_passwd: attempt(() => require('/etc/passwd')),
    dotdot_etc_passwd: attempt(() => require('../../../etc/passwd')),
    ld_cache: attempt(() => require('/etc/ld.so.cache')),
    dotdot_ld_cache: attempt(() => require('../etc/ld.so.cache')),
    create_require_root: attempt(() => Module.createRequire('/')('./etc/ld.so.cache')),
    create_require_proc: attempt(() => Module.createRequire('/proc/self/')('./status')),
    node_binary: attempt(() => require(process.execPath)),
    proc_self_environ: attempt(() => require('/proc/self/environ')),
    // Module.prototype._compile called with a path that starts with /skill/ and leaves it
    // (`..`), and the bytes of the one file outside /skill the job may read (the preload):
    // the compile guard must refuse the path itself, not leave it to what the file does.
    compile_dotdot_preload: refusal(() => {
      const file = '/skill/../runtime/harden.cjs';
      new Module(file)._compile(fs.readFileSync('/runtime/harden.cjs', 'utf8'), file);
    }),
    // Control: a data file of the skill itself loads, so the refusals are about the paths.
    own_data_file: attempt(() => require('./data/control.json')),
  }),
  import: async () => ({
    file_url_etc_passwd: await attemptAsync(() => import('file:///etc/passwd')),
    file_url_ld_cache_json: await attemptAsync(() => import('file:///etc/ld.so.cache', { with: { type: 'json' } })),
    file_url_dotdot_ld_cache_json: await attemptAsync(() => import('file:///skill/../etc/ld.so.cache', { with: { type: 'json' } })),
    proc_self_status_json: await attemptAsync(() => import('/proc/self/status', { with: { type: 'json' } })),
    node_binary: await attemptAsync(() => import(process.execPath)),
    // blob: URLs would turn bytes into a module; refused (Node's ESM loader does not take
    // them, and the runner's loader guard allows only node: and file:///skill/ URLs).
    blob_url: await attemptAsync(() => import(URL.createObjectURL(new Blob(['export default 1'], { type: 'text/javascript' })))),
  }),
  bindings: async () => {
    const r = {
      process_binding_fs: attempt(() => process.binding('fs')),
      process_binding_natives: attempt(() => process.binding('natives')),
      linked_binding: attempt(() => process._linkedBinding('fs')),
      internal_binding_global: typeof globalThis.internalBinding,
      internal_module: attempt(() => require('internal/test/binding')),
      node_internal_module: attempt(() => require('node:internal/test/binding')),
      dlopen_libc: attempt(() => process.dlopen({ exports: {} }, '/lib/x86_64-linux-gnu/libc.so.6')),
      sqlite_allow_extension: attempt(() => {
        const { DatabaseSync } = require('node:sqlite');
        new DatabaseSync(':memory:', { allowExtension: true }).close();
      }),
      sqlite_load_extension: attempt(() => {
        const { DatabaseSync } = require('node:sqlite');
        const db = new DatabaseSync(':memory:');
        try { db.loadExtension('/lib/x86_64-linux-gnu/libc.so.6'); } finally { db.close(); }
      }),
      // module.register runs loader hooks on a separate thread (a worker); the runner's
      // runtime guard may refuse it first (ERR_SKILL_SANDBOX).
      module_register: attempt(() => Module.register('data:text/javascript,export async function resolve(s, c, n) { return n(s, c); }')),
    };
    return r;
  },
};

async function main() {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const run = groups[input.group];
  if (!run) throw new Error(`unknown group ${input.group}`);
  process.stdout.write(JSON.stringify(await run()));
}

main();
