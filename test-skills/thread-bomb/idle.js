'use strict';
// Worker body, only ever run if workers were not blocked: idles 1 s, then ends.
setTimeout(() => {}, 1000);
