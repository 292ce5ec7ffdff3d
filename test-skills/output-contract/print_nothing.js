'use strict';
// Reads its input, writes nothing, exits 0: the runner must say no_output.
const { readInput } = require('./read_input.js');

readInput().then(() => {
  process.stderr.write('print_nothing: done, and nothing was printed on purpose\n');
});
