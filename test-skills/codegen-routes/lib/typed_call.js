'use strict';
// Read as JavaScript this exports false: `six < T > (seven)` compares. Read as TypeScript
// (Node's type stripping) the `<T>` is a type argument and it calls six(seven): 42. Used by
// the route bypass_compile_as_typescript of list_routes.js.
const T = 0;
const seven = 7;
function six(x) { return 6 * x; }
module.exports = six < T > (seven);
