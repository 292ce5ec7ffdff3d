'use strict';
const { sum } = require('./math.js');

const SYMBOLS = { EUR: '€', USD: '$', GBP: '£', CHF: 'CHF ' };

function groupThousands(digits) {
  const groups = [];
  for (let end = digits.length; end > 0; end -= 3) groups.unshift(digits.slice(Math.max(0, end - 3), end));
  return groups.join(',');
}

function money(cents, currency) {
  const symbol = SYMBOLS[currency];
  if (symbol === undefined) throw new Error(`unknown currency ${currency}`);
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  const whole = groupThousands(String(Math.floor(abs / 100)));
  const frac = String(abs % 100).padStart(2, '0');
  return `${sign}${symbol}${whole}.${frac}`;
}

// Kept for callers that total already-formatted parts; shows lib files can share code.
function totalOf(centsList, currency) {
  return money(sum(centsList), currency);
}

module.exports = { money, totalOf };
