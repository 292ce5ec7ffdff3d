'use strict';
// Writes raw bytes to stdout, per mode:
//   text             Hello, world          not JSON                      -> error/bad_output
//   two_values       {"a":1}\n{"b":2}      two JSON values               -> error/bad_output
//   truncated        {"a":[1,2             cut off                       -> error/bad_output
//   invalid_utf8     {"s":"<0xFF>"}        JSON text must be UTF-8       -> error/bad_output
//   padded           whitespace around one value, allowed by the spec  -> ok {"a":1}
//   json_then_exit_3 a valid value, then exit code 3                    -> error/exit
const { readInput } = require('./read_input.js');

const OUT = {
  text: Buffer.from('Hello, world\n'),
  two_values: Buffer.from('{"a":1}\n{"b":2}\n'),
  truncated: Buffer.from('{"a":[1,2'),
  invalid_utf8: Buffer.concat([Buffer.from('{"s":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
  padded: Buffer.from(' \n\t {"a":1} \r\n\n'),
  json_then_exit_3: Buffer.from('{"done":true}'),
};

readInput().then(({ mode }) => {
  if (!Object.hasOwn(OUT, mode)) throw new Error(`unknown mode ${JSON.stringify(mode)}`);
  if (mode === 'json_then_exit_3') process.exitCode = 3;
  process.stdout.write(OUT[mode]);
});
