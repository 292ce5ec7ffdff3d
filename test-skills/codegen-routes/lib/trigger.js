'use strict';
// Loaded once by list_routes.js to make the CommonJS loader compile a file (a plain,
// harmless module); see the route loader_compile_leaked_via_function_call.
module.exports = 'trigger';
