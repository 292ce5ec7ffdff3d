'use strict';
// HOSTILE (do not run outside the sandbox). Gathers what a tool could learn about the host:
// its uid and user, the host name, network interfaces, the diagnostic report (which
// embeds the environment, interfaces, command line and limits), Node's flags. None of it
// is guarded by the permission model; the namespaces and the empty environment are what
// keep host values out. Host-specific numbers (CPU count, memory, kernel release, the
// uid's exact value, which is fresh per job) are reduced to facts that hold on any host.
const fs = require('fs');
const os = require('os');

function attempt(run) {
  try {
    return { value: run() };
  } catch (e) {
    // A libuv system error carries the errno name in e.info (ENOENT: no passwd entry).
    return e.info?.code ? { error: e.code, errno: e.info.code } : { error: e.code ?? e.name };
  }
}

const SANDBOX_UID_MIN = 2100000000;

// Node's flags: the three the spec requires must be there, and no --allow-* grant but
// fs reads. What is read-granted besides /skill/ (e.g. a runtime file the runner preloads)
// is the runner's business; the effective permissions are checked separately below with
// process.permission.has, on paths that matter. The V8 heap ceiling follows mem_bytes:
// only its presence is asserted.
const REQUIRED = ['--permission', '--allow-fs-read=/skill/', '--disallow-code-generation-from-strings'];
function flagFacts(args) {
  return {
    required_present: REQUIRED.filter((f) => args.includes(f)),
    grants_other_than_fs_read: args.filter((a) => a.startsWith('--allow-') && !a.startsWith('--allow-fs-read=')),
    heap_ceiling_set: args.some((a) => /^--max-old-space-size=\d+$/.test(a)),
  };
}

const groups = {
  identity: () => {
    const uid = process.getuid();
    return {
      uid_is_sandbox_range: uid >= SANDBOX_UID_MIN,
      gid_equals_uid: process.getgid() === uid,
      euid_equals_uid: process.geteuid() === uid,
      supplementary_groups: attempt(() => process.getgroups()),
      user_info: attempt(() => os.userInfo()),
      homedir: attempt(() => os.homedir()),
      hostname: os.hostname(),
      env_keys: Object.keys(process.env),
      cwd: process.cwd(),
      exec_argv: flagFacts(process.execArgv),
      argv_script: process.argv.slice(1),
      permission: {
        read_skill: process.permission.has('fs.read', '/skill/'),
        read_root: process.permission.has('fs.read', '/'),
        read_etc: process.permission.has('fs.read', '/etc/'),
        read_proc: process.permission.has('fs.read', '/proc/'),
        read_node_binary: process.permission.has('fs.read', process.execPath),
        write_skill: process.permission.has('fs.write', '/skill/'),
        write_any: process.permission.has('fs.write'),
        child: process.permission.has('child'),
        worker: process.permission.has('worker'),
        addon: process.permission.has('addon'),
        wasi: process.permission.has('wasi'),
        inspector: process.permission.has('inspector'),
      },
      // How many CPUs or how much memory the tool sees is the host's business (and what /proc
      // the runner mounts): only that the calls answer is asserted.
      cpus_is_list: Array.isArray(os.cpus()),
      totalmem_is_number: Number.isFinite(os.totalmem()),
    };
  },
  network: () => ({
    interfaces: os.networkInterfaces(),
  }),
  report: () => {
    const report = process.report.getReport();
    const h = report.header;
    return {
      environment: report.environmentVariables,
      host: h.host,
      network_interfaces: h.networkInterfaces,
      cwd: h.cwd,
      command_line: { ...flagFacts(h.commandLine.slice(1, -1)), script: h.commandLine.at(-1) },
      limits: {
        core_file_size_blocks: report.userLimits.core_file_size_blocks,
        file_size_blocks: report.userLimits.file_size_blocks,
        open_files: report.userLimits.open_files,
      },
      libuv_handle_types: [...new Set(report.libuv.map((handle) => handle.type))].sort(),
      workers: report.workers.length,
    };
  },
};

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const run = groups[input.group];
if (!run) throw new Error(`unknown group ${input.group}`);
process.stdout.write(JSON.stringify(run()));
