'use strict';
// HOSTILE (do not run outside the sandbox). Tries to write: its own folder (/skill),
// its own code, /tmp, /dev/shm. Exclusive-create ('wx') names that no one else uses, so
// even a broken sandbox cannot clobber an existing file; anything written is removed.
// Expected: fs writes throw ERR_ACCESS_DENIED (permission model, no --allow-fs-write);
// node:sqlite, which writes outside the permission model (verified on Node 24.22.3),
// must be stopped by the OS sandbox (read-only /skill, no writable path): ERR_SQLITE_ERROR.
const fs = require('fs');
const path = require('path');

const NAME = 'openvibe-write-probe';

function tryFs(write, cleanup) {
  try {
    write();
  } catch (e) {
    return { written: false, code: e.code ?? e.name };
  }
  try { cleanup(); } catch { /* report the write anyway */ }
  return { written: true };
}

function trySqlite(file) {
  let db;
  try {
    const { DatabaseSync } = require('node:sqlite');
    db = new DatabaseSync(file);
    db.exec('CREATE TABLE probe (x INTEGER); INSERT INTO probe VALUES (1);');
  } catch (e) {
    return { written: false, code: e.code ?? e.name };
  } finally {
    try { db?.close(); } catch { /* not open */ }
  }
  try { fs.unlinkSync(file); } catch { /* report the write anyway */ }
  return { written: true };
}

const inSkill = path.join(__dirname, NAME);
const report = {
  skill_file: tryFs(() => fs.writeFileSync(inSkill, 'x', { flag: 'wx' }), () => fs.unlinkSync(inSkill)),
  tmp_file: tryFs(() => fs.writeFileSync(`/tmp/${NAME}`, 'x', { flag: 'wx' }), () => fs.unlinkSync(`/tmp/${NAME}`)),
  dev_shm_file: tryFs(() => fs.writeFileSync(`/dev/shm/${NAME}`, 'x', { flag: 'wx' }), () => fs.unlinkSync(`/dev/shm/${NAME}`)),
  tmp_mkdir: tryFs(() => fs.mkdirSync(`/tmp/${NAME}.d`), () => fs.rmdirSync(`/tmp/${NAME}.d`)),
  // Appending nothing and re-setting the current mode change nothing even if allowed,
  // but both need write access to the file.
  append_own_code: tryFs(() => fs.appendFileSync(__filename, ''), () => {}),
  chmod_own_code: tryFs(() => fs.chmodSync(__filename, fs.statSync(__filename).mode & 0o777), () => {}),
  sqlite_skill: trySqlite(path.join(__dirname, `${NAME}.db`)),
  sqlite_tmp: trySqlite(`/tmp/${NAME}.db`),
};
process.stdout.write(JSON.stringify(report));
