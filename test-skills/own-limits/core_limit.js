'use strict';
// The core-file limit of the job: 1 byte, which the kernel reads as "no core dump, not
// even to a pipe" (a core_pattern such as systemd-coredump's), where 0 is ignored for
// pipes. Node's diagnostic report lists it (unlimited is the string "unlimited").
const limits = process.report.getReport().userLimits;
process.stdout.write(JSON.stringify({ core_file_size_blocks: limits.core_file_size_blocks }));
