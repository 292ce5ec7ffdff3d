// HOSTILE (do not run outside the sandbox). The package says "type": "module", so Node
// takes a file without an extension under it as an ES module, and it takes a module's type
// from the URL's path, never from its query or fragment. `notes` is not a .js input (it
// was not scanned as code); it computes 42 when it runs. Each route tries to run it through
// a URL whose whole text ends in .js or .mjs while its path does not. The report says,
// per route, whether it ran and the error code when it did not.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

const routes = {
  // Controls: the tool's own .js module loads; `notes` by its own name is refused.
  own_module: async () => (await import('./lib.js')).default === 'lib',
  notes_by_name: async () => (await import('./notes')).default === 42,
  notes_required: async () => require('./notes') !== undefined,
  // The routes of the issue: the extension check must judge the path.
  file_url_query_js: async () => (await import('file:///skill/notes?x.js')).default === 42,
  file_url_fragment_js: async () => (await import('file:///skill/notes#x.js')).default === 42,
  file_url_query_mjs: async () => (await import('file:///skill/notes?.mjs')).default === 42,
  relative_query_js: async () => (await import('./notes?x.js')).default === 42,
  relative_fragment_cjs: async () => (await import('./notes#.cjs')).default === 42,
  // A query or fragment on a real .js file is refused too: one rule, no exceptions.
  own_module_with_query: async () => (await import('./lib.js?v=2')).default === 'lib',
  own_module_with_fragment: async () => (await import('./lib.js#top')).default === 'lib',
};

const report = {};
for (const [name, route] of Object.entries(routes)) {
  try {
    report[name] = { loaded: await route() };
  } catch (e) {
    report[name] = { code: e.code ?? e.name, loaded: false };
  }
}
process.stdout.write(JSON.stringify(report));
