'use strict';
const { loadCountries, readInput } = require('./countries.js');

const { region } = readInput();
const names = loadCountries()
  .filter((c) => c.region === region)
  .map((c) => c.name)
  .sort();
process.stdout.write(JSON.stringify({ region, count: names.length, countries: names }));
