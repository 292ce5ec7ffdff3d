'use strict';
// HOSTILE (do not run outside the sandbox). Tries to read host files outside /skill.
// Reports, per target, only whether it could be read and the error code: never any
// content, so even a failure of the sandbox leaks nothing into test logs.
// Expected: every fs attempt throws ERR_ACCESS_DENIED (Node's permission model, which
// resolves "..", and /proc/self/root before checking); the node:sqlite attempts, which
// the permission model does not check, fail in the OS sandbox (SQLITE_CANTOPEN).
const fs = require('fs');

function tryFs(read) {
  try {
    read();
    return { readable: true };
  } catch (e) {
    return { readable: false, code: e.code ?? e.name };
  }
}

// node:sqlite opens files itself, outside the permission model: opening any file that
// exists and is readable succeeds (a text file then fails the first query with
// SQLITE_NOTADB, errcode 26). Only "cannot open" (errcode 14) means not readable.
function trySqlite(file) {
  let db;
  try {
    const { DatabaseSync } = require('node:sqlite');
    db = new DatabaseSync(file, { readOnly: true });
    db.prepare('SELECT count(*) FROM sqlite_master').get();
    return { readable: true };
  } catch (e) {
    if (e.errcode !== undefined && e.errcode !== 14) return { readable: true };
    return { readable: false, code: e.code ?? e.name };
  } finally {
    try { db?.close(); } catch { /* not open */ }
  }
}

const report = {
  etc_passwd: tryFs(() => fs.readFileSync('/etc/passwd')),
  etc_shadow: tryFs(() => fs.readFileSync('/etc/shadow')),
  proc_1_environ: tryFs(() => fs.readFileSync('/proc/1/environ')),
  proc_self_environ: tryFs(() => fs.readFileSync('/proc/self/environ')),
  root_dir: tryFs(() => fs.readdirSync('/root')),
  parent_dir: tryFs(() => fs.readdirSync('..')),
  parent_escape: tryFs(() => fs.readFileSync(__dirname + '/../etc/passwd')),
  proc_self_root: tryFs(() => fs.readFileSync('/proc/self/root/etc/passwd')),
  stat_etc_passwd: tryFs(() => fs.statSync('/etc/passwd')),
  sqlite_etc_passwd: trySqlite('/etc/passwd'),
  sqlite_etc_shadow: trySqlite('/etc/shadow'),
};
process.stdout.write(JSON.stringify(report));
