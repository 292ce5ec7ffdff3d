'use strict';
// Would be run by fork() or new Worker() if they were not blocked: does nothing, exits.
process.exit(0);
