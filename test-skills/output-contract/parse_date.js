'use strict';
// Fails on purpose (an uncaught Error, so exit code 1 and a stack on stderr) when the
// input is not a real calendar date.
const { readInput } = require('./read_input.js');

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

function parseDate(s) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  const t = m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : NaN;
  const d = new Date(t);
  if (!m || Number.isNaN(t) || d.getUTCFullYear() !== Number(m[1]) ||
      d.getUTCMonth() !== Number(m[2]) - 1 || d.getUTCDate() !== Number(m[3])) {
    throw new Error(`invalid date: ${JSON.stringify(s)} (expected a real calendar date as YYYY-MM-DD)`);
  }
  const year = d.getUTCFullYear();
  return {
    iso: s,
    year,
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    weekday: WEEKDAYS[d.getUTCDay()],
    day_of_year: Math.round((t - Date.UTC(year, 0, 1)) / 86400000) + 1,
    leap_year: (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0,
  };
}

readInput().then((input) => {
  process.stdout.write(JSON.stringify(parseDate(String(input.date))));
});
