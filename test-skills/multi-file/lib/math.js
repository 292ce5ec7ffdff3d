'use strict';
// Money as integer cents, so 0.1 + 0.2 is never 0.30000000000000004.

function toCents(decimal) {
  const [whole, frac = ''] = String(decimal).split('.');
  return Number(whole) * 100 + Number((frac + '00').slice(0, 2));
}

function sum(values) {
  return values.reduce((a, b) => a + b, 0);
}

// percent may have decimals (7.5); rounds half away from zero to whole cents.
function percentOf(cents, percent) {
  const exact = (cents * percent) / 100;
  return Math.sign(exact) * Math.round(Math.abs(exact));
}

module.exports = { toCents, sum, percentOf };
