'use strict';
// Shared by the tools of this skill: all of stdin, parsed as JSON.
async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}
module.exports = { readInput };
