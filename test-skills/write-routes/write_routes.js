'use strict';
// HOSTILE (do not run outside the sandbox). Tries to write files by routes other than
// fs.writeFile: Node's diagnostics, which write files from native code (trace_events,
// process.report, v8.writeHeapSnapshot, the inspector), node:sqlite, which opens and
// creates files past the permission model on Node 24 (ATTACH, VACUUM INTO, URI filenames,
// backup(), spilled temp files), and fs calls write-files does not use.
// Every name is unique to this probe and created exclusively where that is possible;
// anything that does get written is removed and reported as written: true.
// Expected: the permission model refuses the Node routes (ERR_ACCESS_DENIED); the sqlite
// routes reach the kernel and fail there (read-only /skill, no writable directory,
// seccomp refuses open(2) with O_CREAT/O_RDWR): SQLITE_CANTOPEN (14), and the temp spill
// SQLITE_IOERR_GETTEMPPATH (6410: no usable temporary directory at all).
const fs = require('fs');
const path = require('path');

const NAME = 'openvibe-write-route-probe';

function attempt(write, cleanup = () => {}) {
  try {
    write();
  } catch (e) {
    return { written: false, code: e.code ?? e.name };
  }
  try { cleanup(); } catch { /* report the write anyway */ }
  return { written: true };
}

async function attemptAsync(write) {
  try {
    await write();
  } catch (e) {
    return e.errcode === undefined ? { written: false, code: e.code ?? e.name } : { written: false, code: e.code, errcode: e.errcode };
  }
  return { written: true };
}

function sqlite(run) {
  const { DatabaseSync } = require('node:sqlite');
  let db;
  try {
    db = run(DatabaseSync);
    return { written: true };
  } catch (e) {
    return { written: false, code: e.code ?? e.name, errcode: e.errcode ?? null };
  } finally {
    try { db?.close(); } catch { /* not open */ }
  }
}

function listSkill() {
  return fs.readdirSync(__dirname, { recursive: true }).sort();
}

const groups = {
  diagnostics: async () => {
    const before = listSkill();
    const r = {
      trace_events: attempt(() => {
        const tracing = require('trace_events').createTracing({ categories: ['node.perf', 'v8'] });
        tracing.enable();
        tracing.disable();
      }),
      report_default: attempt(() => process.report.writeReport()),
      report_in_skill: attempt(() => process.report.writeReport(path.join(__dirname, `${NAME}.json`))),
      report_in_tmp: attempt(() => process.report.writeReport(`/tmp/${NAME}.json`)),
      heap_snapshot_default: attempt(() => require('v8').writeHeapSnapshot()),
      heap_snapshot_in_tmp: attempt(() => require('v8').writeHeapSnapshot(`/tmp/${NAME}.heapsnapshot`)),
      inspector_open: attempt(() => { require('inspector').open(0, '127.0.0.1'); require('inspector').close(); }),
      inspector_session: attempt(() => { const s = new (require('inspector').Session)(); s.connect(); s.disconnect(); }),
    };
    // Native writers may finish after the call returns: look again a little later.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = listSkill();
    r.new_files_in_skill = after.filter((f) => !before.includes(f));
    return r;
  },
  sqlite: async () => {
    const { backup, DatabaseSync } = require('node:sqlite');
    const r = {
      attach_tmp: sqlite((D) => { const db = new D(':memory:'); db.exec(`ATTACH DATABASE '/tmp/${NAME}.db' AS x; CREATE TABLE x.t (a);`); return db; }),
      attach_dev_shm: sqlite((D) => { const db = new D(':memory:'); db.exec(`ATTACH DATABASE '/dev/shm/${NAME}.db' AS x; CREATE TABLE x.t (a);`); return db; }),
      attach_skill: sqlite((D) => { const db = new D(':memory:'); db.exec(`ATTACH DATABASE '${__dirname}/${NAME}.db' AS x; CREATE TABLE x.t (a);`); return db; }),
      vacuum_into_tmp: sqlite((D) => { const db = new D(':memory:'); db.exec(`CREATE TABLE t (a); VACUUM INTO '/tmp/${NAME}-vacuum.db'`); return db; }),
      uri_mode_rwc: sqlite((D) => { const db = new D(`file:/tmp/${NAME}-uri.db?mode=rwc`); db.exec('CREATE TABLE t (a)'); return db; }),
      open_in_skill: sqlite((D) => { const db = new D(path.join(__dirname, `${NAME}.db`)); db.exec('CREATE TABLE t (a)'); return db; }),
      // A temporary table bigger than the page cache must spill to a file in some temp dir.
      temp_spill: sqlite((D) => {
        const db = new D(':memory:');
        db.exec(`PRAGMA temp_store = FILE; PRAGMA cache_size = 1; CREATE TEMP TABLE t (a);
          WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)
          INSERT INTO t SELECT randomblob(200) FROM c;`);
        return db;
      }),
    };
    const mem = new DatabaseSync(':memory:');
    mem.exec('CREATE TABLE t (a)');
    r.backup_to_tmp = await attemptAsync(() => backup(mem, `/tmp/${NAME}-backup.db`));
    mem.close();
    return r;
  },
  fs_calls: async () => {
    const own = __filename;
    const size = fs.statSync(own).size;
    const r = {
      mkdtemp_tmp: attempt(() => fs.mkdtempSync(`/tmp/${NAME}-`), () => {}),
      mkdtemp_skill: attempt(() => fs.mkdtempSync(path.join(__dirname, `${NAME}-`)), () => {}),
      copy_own_code_to_tmp: attempt(() => fs.copyFileSync(own, `/tmp/${NAME}.js`, fs.constants.COPYFILE_EXCL), () => fs.unlinkSync(`/tmp/${NAME}.js`)),
      cp_own_code_in_skill: attempt(() => fs.cpSync(own, path.join(__dirname, `${NAME}.js`), { errorOnExist: true, force: false })),
      rename_own_code: attempt(() => fs.renameSync(own, own), () => {}),
      // Same size and same times: a no-op even if it were allowed, but it needs write access.
      truncate_own_code: attempt(() => fs.truncateSync(own, size)),
      utimes_own_code: attempt(() => { const s = fs.statSync(own); fs.utimesSync(own, s.atime, s.mtime); }),
      // victim.txt is the job's own copy (the host's folder is never mounted): even a
      // broken sandbox would only lose that copy.
      rm_victim_in_skill: attempt(() => fs.rmSync(path.join(__dirname, 'victim.txt'))),
      unlink_victim_in_skill: attempt(() => fs.unlinkSync(path.join(__dirname, 'victim.txt'))),
      open_own_code_r_plus: attempt(() => fs.closeSync(fs.openSync(own, 'r+'))),
      write_stream_tmp: await new Promise((resolve) => {
        let s;
        try { s = fs.createWriteStream(`/tmp/${NAME}-stream`, { flags: 'wx' }); } catch (e) { resolve({ written: false, code: e.code ?? e.name }); return; }
        s.once('error', (e) => resolve({ written: false, code: e.code ?? e.name }));
        s.once('open', () => { s.destroy(); try { fs.unlinkSync(`/tmp/${NAME}-stream`); } catch { /* report anyway */ } resolve({ written: true }); });
      }),
      promises_write_tmp: await attemptAsync(() => fs.promises.writeFile(`/tmp/${NAME}-promise`, 'x', { flag: 'wx' })),
      // A descriptor opened for reading cannot be written: EBADF from the kernel.
      write_via_read_fd: attempt(() => { const fd = fs.openSync(own, 'r'); try { fs.writeSync(fd, ''); fs.writeSync(fd, 'x', size); } finally { fs.closeSync(fd); } }),
    };
    r.victim_still_there = fs.readFileSync(path.join(__dirname, 'victim.txt'), 'utf8') === 'still here\n';
    return r;
  },
};

async function main() {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const run = groups[input.group];
  if (!run) throw new Error(`unknown group ${input.group}`);
  process.stdout.write(JSON.stringify(await run()));
}

main();
