'use strict';
// HOSTILE (do not run outside the sandbox). Looks for other processes to signal. Uses
// signal 0 only: the kernel checks existence and permission and delivers nothing.
//
// In the sandbox Node is the first process of its own pid namespace (pid 1, or 2 under
// a runner-provided init, which is then its parent). Its own threads also have pids in
// that namespace and answer kill(tid, 0) with success, so success on a small pid proves
// nothing. What does:
//   in_own_pid_namespace  process.pid <= 8 (in the host's namespace it is far larger);
//   other_processes_visible  kill(-1, 0): the kernel walks every process of the caller's
//                         pid namespace except pid 1 and the caller's own thread group
//                         (threads are not processes here). ESRCH means there is none
//                         -> false; success means one exists, even one it may not signal;
//   visible_foreign_pids  pids in 1..64, other than itself and its parent, whose
//                         kill(pid, 0) fails with EPERM: a process that exists and belongs
//                         to another uid (a host process, if there were no pid namespace).
// Expected: {"in_own_pid_namespace":true,"other_processes_visible":false,"visible_foreign_pids":[]}
let othersVisible;
try {
  process.kill(-1, 0);
  othersVisible = true;
} catch (e) {
  othersVisible = e.code === 'ESRCH' ? false : `error ${e.code}`;
}

const foreign = [];
for (let pid = 1; pid <= 64; pid++) {
  if (pid === process.pid || pid === process.ppid) continue;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if (e.code === 'EPERM') foreign.push(pid);
  }
}

process.stderr.write(`signal-host: pid ${process.pid}, ppid ${process.ppid}\n`);
process.stdout.write(JSON.stringify({
  in_own_pid_namespace: process.pid <= 8,
  other_processes_visible: othersVisible,
  visible_foreign_pids: foreign,
}));
