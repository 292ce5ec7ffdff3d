'use strict';
// HOSTILE (do not run outside the sandbox). Looks for secrets in the environment.
// The runner starts Node with an empty environment (env -i), so there is nothing to find.
// Only names are reported, never values, except HOME and PATH which carry no secret.
const env = process.env;
process.stdout.write(JSON.stringify({
  env_keys: Object.keys(env).sort(),
  home: env.HOME ?? null,
  path: env.PATH ?? null,
}));
