'use strict';
// Loads the country table that ships beside the code (data/countries.json).
const fs = require('fs');
const path = require('path');

function loadCountries() {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'data/countries.json'), 'utf8'));
}

// Reads all of stdin synchronously (fd 0), the simplest way for a small input.
function readInput() {
  return JSON.parse(fs.readFileSync(0, 'utf8'));
}

module.exports = { loadCountries, readInput };
