'use strict';
// HOSTILE-ish (do not run outside the sandbox). Destroys process.stdout, closes descriptor
// 1 itself (descriptor calls are not checked by the permission model), shows that a later
// write finds no descriptor, and exits 0. The runner sees stdout end with nothing on it:
// error/no_output, not ok and not a runner failure.
const fs = require('fs');
process.stdout.destroy();
fs.closeSync(1);
let code;
try {
  fs.writeSync(1, '{"late":true}');
  code = 'written';
} catch (e) {
  code = e.code;
}
process.stderr.write(`close-stdout: write to fd 1 after close: ${code}\n`);
process.exit(0);
