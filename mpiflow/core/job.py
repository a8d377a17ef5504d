"""Run a command in its own process group: signals forwarded, a deadline, nothing left behind.

``python -m mpiflow.launch`` runs its ``mpiexec`` this way (:func:`run`): SIGINT, SIGTERM and
SIGHUP go on to the whole group (``mpiexec`` stops its ranks), a third Ctrl-C kills every
process the launcher started, and after the timeout the group gets SIGTERM, then SIGKILL after
:data:`GRACE_SECONDS`. Pure: no MPI.

Examples:
    >>> import sys
    >>> run([sys.executable, "-c", "raise SystemExit(3)"], {}, timeout=60)
    3
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType

__all__ = ["GRACE_SECONDS", "TIMEOUT_STATUS", "run"]

TIMEOUT_STATUS = 124  # the exit status after the timeout, as coreutils' timeout gives
GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL when stopping a job


def _descendants(pid: int) -> list[int]:
    """The processes descended from ``pid``, from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class _Job:
    """A running launcher process group, with signal forwarding and a deadline."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        self.interrupts = 0

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill_tree(self) -> None:
        """SIGKILL the launcher's group and every process it started (Hydra puts its proxies
        and ranks in sessions of their own, so the group alone would miss them)."""
        for pid in _descendants(self.proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.signal_group(signal.SIGKILL)

    def forward(self, signum: int, frame: FrameType | None) -> None:
        """Pass a signal on to the job (mpiexec stops its ranks); a third Ctrl-C kills all."""
        self.interrupts += signum == signal.SIGINT
        if self.interrupts > 2:
            self.kill_tree()
        else:
            self.signal_group(signum)

    def stop(self) -> None:
        """SIGTERM the job, then SIGKILL what is left of it after a grace period."""
        self.signal_group(signal.SIGTERM)
        try:
            self.proc.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill_tree()
            self.proc.wait()

    def wait(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                print(f"mpiflow.launch: the job ran past --timeout {timeout:g} s; stopping it",
                      file=sys.stderr, flush=True)
                self.stop()
                return TIMEOUT_STATUS
            try:
                code = self.proc.wait(left)
            except subprocess.TimeoutExpired:
                continue
            return 128 - code if code < 0 else code


def run(cmd: list[str], env: dict[str, str], timeout: float | None) -> int:
    """Run ``cmd`` in its own process group, forwarding signals; return its exit status.

    Args:
        cmd: the command line.
        env: its environment.
        timeout: seconds before the group is stopped (status 124); None waits forever.

    Returns:
        The exit status: the command's, 124 after the timeout, 128 + N after signal N.
    """
    job = _Job(cmd, env)
    forwarded = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    previous = {sig: signal.signal(sig, job.forward) for sig in forwarded}
    try:
        return job.wait(timeout)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
