'use strict';
const { loadCountries, readInput } = require('./countries.js');

const input = readInput();
const code = String(input.code ?? '').trim().toUpperCase();
if (!/^[A-Z]{2,3}$/.test(code)) throw new Error(`not a country code: ${JSON.stringify(input.code)}`);
const key = code.length === 2 ? 'alpha2' : 'alpha3';
const country = loadCountries().find((c) => c[key] === code);
process.stdout.write(JSON.stringify(country ? { found: true, country } : { found: false, code }));
