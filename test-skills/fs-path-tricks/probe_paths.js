'use strict';
// HOSTILE (do not run outside the sandbox). Tries to reach files outside /skill by routes
// the plain "read /etc/passwd" of read-host-files does not take. Reports, per attempt, only
// whether it was allowed and the error code: never any content.
//
// Targets are chosen so that a refusal proves something. /etc/ld.so.cache and the Node
// binary exist INSIDE the job's minimal root (the loader needs them), so a permission-model
// gap would show up as `allowed: true`, not hide behind ENOENT. The node:sqlite rows open
// files past the permission model (Node 24 does not check sqlite paths), so they show what
// the OS layer (minimal root, landlock, /proc's ptrace checks, seccomp) does on its own:
// errcode 14 is SQLITE_CANTOPEN (the open(2) failed).
//
// input.group selects one group of attempts; each group is one case in cases.json.
const fs = require('fs');

function tryFs(run) {
  try {
    run();
    return { allowed: true };
  } catch (e) {
    return { allowed: false, code: e.code ?? e.name };
  }
}

// Opens `file` with node:sqlite and runs one query. SQLITE_CANTOPEN (14) means open(2)
// failed; any other outcome means the file was opened (a non-database file gives 26,
// a zero-length /proc file even looks like an empty database).
function trySqlite(file, readOnly = true) {
  let db;
  try {
    const { DatabaseSync } = require('node:sqlite');
    db = new DatabaseSync(file, { readOnly });
    if (readOnly) db.prepare('SELECT count(*) FROM sqlite_master').get();
    else db.exec('CREATE TABLE probe (x INTEGER)');
    return { opened: true };
  } catch (e) {
    if (e.errcode !== undefined && e.errcode !== 14) return { opened: true, errcode: e.errcode };
    return { opened: false, errcode: e.errcode ?? null };
  } finally {
    try { db?.close(); } catch { /* not open */ }
  }
}

const groups = {
  // Symlinks and link resolution. fs.symlinkSync needs full read+write permission; reading
  // a link or resolving a path outside /skill is a read of that path, refused too.
  symlinks: () => ({
    symlink_to_etc_passwd: tryFs(() => fs.symlinkSync('/etc/passwd', `${__dirname}/passwd-link`)),
    hardlink_ld_cache: tryFs(() => fs.linkSync('/etc/ld.so.cache', `${__dirname}/ld-link`)),
    readlink_proc_self_exe: tryFs(() => fs.readlinkSync('/proc/self/exe')),
    readlink_proc_self_cwd: tryFs(() => fs.readlinkSync('/proc/self/cwd')),
    lstat_proc_self_exe: tryFs(() => fs.lstatSync('/proc/self/exe')),
    realpath_proc_self_root: tryFs(() => fs.realpathSync('/proc/self/root')),
    realpath_native_proc_self_cwd: tryFs(() => fs.realpathSync.native('/proc/self/cwd')),
    realpath_skill_parent: tryFs(() => fs.realpathSync('/skill/..')),
    // Control: the same API works inside /skill, so the refusals above are about the path.
    realpath_skill: fs.realpathSync('/skill'),
  }),
  // The roots and files of other processes in /proc, the mount table, /sys.
  proc_and_sys: () => ({
    proc_self_root_ld_cache: tryFs(() => fs.readFileSync('/proc/self/root/etc/ld.so.cache')),
    proc_1_root_etc_passwd: tryFs(() => fs.readFileSync('/proc/1/root/etc/passwd')),
    proc_1_cwd: tryFs(() => fs.readdirSync('/proc/1/cwd')),
    proc_self_mountinfo: tryFs(() => fs.readFileSync('/proc/self/mountinfo')),
    proc_self_status: tryFs(() => fs.readFileSync('/proc/self/status')),
    sys_class_net: tryFs(() => fs.readdirSync('/sys/class/net')),
    sys_fs_cgroup: tryFs(() => fs.readdirSync('/sys/fs/cgroup')),
    // Past the permission model: pid 1 is the runner's init, another uid, so /proc/1's
    // root, environ and mountinfo fail the kernel's ptrace check; /sys is not mounted.
    sqlite_proc_1_root_etc_passwd: trySqlite('/proc/1/root/etc/passwd'),
    sqlite_proc_1_environ: trySqlite('/proc/1/environ'),
    sqlite_proc_1_mountinfo: trySqlite('/proc/1/mountinfo'),
    sqlite_proc_self_root_etc_passwd: trySqlite('/proc/self/root/etc/passwd'),
    sqlite_sys_cgroup_memory_max: trySqlite('/sys/fs/cgroup/memory.max'),
    sqlite_sys_kernel_notes: trySqlite('/sys/kernel/notes'),
  }),
  // One target, many spellings: the permission model must normalize each before checking.
  spellings: () => {
    const r = {
      buffer_path: tryFs(() => fs.readFileSync(Buffer.from('/etc/ld.so.cache'))),
      file_url: tryFs(() => fs.readFileSync(new URL('file:///etc/ld.so.cache'))),
      file_url_encoded_dotdot: tryFs(() => fs.readFileSync(new URL('file:///skill/%2e%2e/etc/ld.so.cache'))),
      dot_dotdot: tryFs(() => fs.readFileSync('/skill/./../etc/ld.so.cache')),
      double_slash: tryFs(() => fs.readFileSync('//etc/ld.so.cache')),
      prefix_sibling: tryFs(() => fs.readdirSync('/skillx')),
      nul_byte: tryFs(() => fs.readFileSync('/skill/\0/../etc/ld.so.cache')),
      exists_sync: tryFs(() => fs.existsSync('/etc/ld.so.cache')),
      access_sync: tryFs(() => fs.accessSync('/etc/ld.so.cache')),
      statfs_root: tryFs(() => fs.statfsSync('/')),
      opendir_parent: tryFs(() => fs.opendirSync('/skill/..').closeSync()),
      watch_etc: tryFs(() => fs.watch('/etc').close()),
      watch_file: tryFs(() => { fs.watchFile('/etc/ld.so.cache', () => {}); fs.unwatchFile('/etc/ld.so.cache'); }),
      read_node_binary: tryFs(() => fs.readFileSync(process.execPath)),
      chdir_root: tryFs(() => process.chdir('/')),
    };
    // After the refused chdir the working directory is still /skill, so this relative path
    // is /skill/etc/ld.so.cache (allowed, absent): ENOENT, not the host's file.
    r.relative_after_chdir = tryFs(() => fs.readFileSync('etc/ld.so.cache'));
    r.cwd_after = process.cwd();
    return r;
  },
  // stdin, stdout and stderr by path: a path through /proc/self/fd or /dev is a path
  // outside /skill (read) and a write (no write permission at all); sqlite's open of fd 1
  // for writing asks open(2) for O_RDWR|O_CREAT, which seccomp answers EPERM.
  stdio_paths: () => ({
    proc_self_fd_0_read: tryFs(() => fs.readFileSync('/proc/self/fd/0')),
    dev_stdin_read: tryFs(() => fs.readFileSync('/dev/stdin')),
    proc_self_fd_1_open_w: tryFs(() => fs.closeSync(fs.openSync('/proc/self/fd/1', 'w'))),
    proc_self_fd_2_append: tryFs(() => fs.appendFileSync('/proc/self/fd/2', '')),
    dev_stdout_write: tryFs(() => fs.writeFileSync('/dev/stdout', '')),
    dev_null_write: tryFs(() => fs.writeFileSync('/dev/null', '')),
    sqlite_proc_self_fd_1_write: trySqlite('/proc/self/fd/1', false),
  }),
  // Descriptors: the runner passes only 0, 1 and 2. Node opens its own (epoll and eventfd
  // anon inodes, libuv's and V8's pipes: 3..16 on Node 24.22.3) right after start; an
  // inherited descriptor would be a regular file, directory, socket or device. fstat on a
  // descriptor is not checked by the permission model, so this is what the OS really handed
  // over. The scan runs before process.stdout is first touched: making that stream opens
  // /dev/null on the next free descriptor (Node's own doing, inside the sandbox).
  descriptors: () => {
    const kinds = {};
    const suspicious = [];
    for (let fd = 3; fd <= 63; fd++) {
      let kind;
      try {
        const s = fs.fstatSync(fd);
        kind = s.isFile() ? 'file' : s.isDirectory() ? 'dir' : s.isSocket() ? 'socket'
          : s.isFIFO() ? 'pipe' : s.isCharacterDevice() ? 'char' : s.isBlockDevice() ? 'block' : 'anon';
      } catch (e) {
        kind = e.code;
      }
      if (fd <= 20 || kind !== 'EBADF') kinds[fd] = kind;
      if (kind !== 'pipe' && kind !== 'anon' && kind !== 'EBADF') suspicious.push(fd);
    }
    return { kinds, suspicious };
  },
};

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const run = groups[input.group];
if (!run) throw new Error(`unknown group ${input.group}`);
const report = JSON.stringify(run()); // before process.stdout exists (see descriptors)
process.stdout.write(report);
