// Date arithmetic and formatting with Day.js and its utc plugin (vendored at test time).
const dayjs = require('./vendor/dayjs/dayjs.min.js');
const utc = require('./vendor/dayjs/plugin/utc.js');
const customParseFormat = require('./vendor/dayjs/plugin/customParseFormat.js');
dayjs.extend(utc);
dayjs.extend(customParseFormat);

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', () => {
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = input.dates.map((text) => {
    const d = dayjs.utc(text, input.parse_format);
    return {
      text,
      valid: d.isValid(),
      iso: d.isValid() ? d.toISOString() : null,
      formatted: d.format(input.format),
      plus: d.add(input.add_days, 'day').format('YYYY-MM-DD'),
      end_of_month: d.endOf('month').format('YYYY-MM-DD'),
      days_to_epoch_2030: dayjs.utc('2030-01-01').diff(d, 'day'),
    };
  });
  process.stdout.write(JSON.stringify(out));
});
