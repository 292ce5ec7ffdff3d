'use strict';
// Worker body, only ever run if workers were not blocked: waits on the shared buffer for at
// most 1 s (the Atomics thread-bomb shape), then ends.
const { workerData } = require('worker_threads');
if (workerData instanceof SharedArrayBuffer) Atomics.wait(new Int32Array(workerData), 0, 0, 1000);
