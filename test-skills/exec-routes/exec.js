'use strict';
// HOSTILE (do not run outside the sandbox). Tries to start a program again once Node runs:
// process.execve of Node itself through /proc/self/exe and through its own path, of the
// dynamic loader with Node as its argument, and child_process.spawnSync of Node.
//
// Input {"route": ROUTE, "loader": PATH}. ROUTE "all" tries every route in turn and reports
// each as {blocked, code}: under the runner's Node flags the permission model refuses each
// before any execve(2). A single ROUTE tries that one alone, for a Node without its
// permission model (the exec gate's test): process.execve that fails aborts Node ("process.
// execve failed with error code EPERM" on stderr); spawnSync reports its error code.
//
// Safety: every target is Node with -e printing {"exec_landed": ROUTE} and nothing else, so
// an exec that went through only says so (and fails the case with another output).
const cp = require('child_process');

const landed = (route) => `process.stdout.write(JSON.stringify({exec_landed:${JSON.stringify(route)}}))`;

const routes = {
  proc_self_exe: () => process.execve('/proc/self/exe', ['node', '-e', landed('proc_self_exe')]),
  node_path: () => process.execve(process.execPath, [process.execPath, '-e', landed('node_path')]),
  loader: (loader) => process.execve(loader, [loader, process.execPath, '-e', landed('loader')]),
  spawn_sync: () => {
    const r = cp.spawnSync(process.execPath, ['-e', landed('spawn_sync')], { timeout: 2000 });
    if (r.error) throw r.error;
    return String(r.stdout);
  },
};

let text = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => { text += c; });
process.stdin.on('end', () => {
  const { route, loader } = JSON.parse(text);
  if (route === 'all') {
    const report = {};
    for (const [name, run] of Object.entries(routes)) {
      try {
        const out = run(loader);
        report[name] = { blocked: false, out };
      } catch (e) {
        report[name] = { blocked: true, code: e.code ?? e.name };
      }
    }
    process.stdout.write(JSON.stringify(report));
    return;
  }
  const run = routes[route];
  if (!run) throw new Error(`unknown route ${route}`);
  // Whether Node's permission model is on (the gate's test runs Node without it).
  const permission_model = process.permission !== undefined;
  try {
    const out = run(loader);
    process.stdout.write(JSON.stringify({ [route]: { blocked: false, out }, permission_model }));
  } catch (e) {
    process.stdout.write(JSON.stringify({ [route]: { blocked: true, code: e.code ?? e.name }, permission_model }));
  }
});
