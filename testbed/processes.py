"""Ending a process the testbed started, and a command being ended: one rule for every caller."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading

DEFAULT_GRACE_S = 5.0
# A command prefix: the process gets SIGKILL as soon as the process that started it dies (before the
# run's supervisor sweeps). setpriv sets PR_SET_PDEATHSIG and execs the command in the same process,
# so no Python runs between fork and exec, as a preexec_fn would (it can deadlock under threads).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


class Terminated(SystemExit):
    """A SIGTERM unwinding this process as Ctrl-C does (`unwind_on_sigterm`): a run stopped by it
    keeps what it has; any other SystemExit is a program's own exit, not an interruption."""


def unwind_on_sigterm(signum, frame) -> None:
    """A signal handler: SIGTERM raises Terminated (status 128 + signal), so clean-up runs."""
    raise Terminated(128 + signum)


class HeldInterruptions:
    """A `with` block that a Ctrl-C or SIGTERM does not cut short: the signal is noted as
    `interruption` (a KeyboardInterrupt, or Terminated) for the caller to raise once what the block
    writes is written whole (a run's results after its last case). Outside the main thread, where
    handlers cannot be set, the block is unprotected."""

    def __init__(self) -> None:
        self._saved: dict[int, object] = {}
        self.interruption: BaseException | None = None

    def _hold(self, signum, frame) -> None:
        if self.interruption is None:
            self.interruption = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(128 + signum)

    def __enter__(self) -> "HeldInterruptions":
        if threading.current_thread() is threading.main_thread():
            try:           # each handler noted before it is replaced: a signal in between finds it put back
                for signum in (signal.SIGINT, signal.SIGTERM):
                    self._saved[signum] = signal.getsignal(signum)
                    signal.signal(signum, self._hold)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        self._saved = {}


class SignalsReachMainThread:
    """A `with` block (in the main thread; one use each) in which a signal's Python handler always
    gets to run, however the main thread is blocked.

    CPython notes a signal in its C handler and runs the Python handler in the main thread between
    two bytecodes, or when a blocking system call of the main thread returns with EINTR. A signal
    noted just before the main thread enters such a call (`input()` in the CLI, `signal.pause()`),
    or handled by another thread, interrupts nothing: the handler waits until the call returns,
    which for a CLI waiting for its user is never (`mrc-testbed up` ignored a SIGTERM that way).

    Every signal with a Python handler writes its number to the wake-up fd (`signal.set_wakeup_fd`);
    a watcher thread reads it and sends the main thread NUDGE (SIGURG, whose handler only notes that
    it ran) until that handler has run there twice. A system call interrupted by a nudge returns
    EINTR (Python retries its own), and the handlers pending then run in the same pass as the
    nudge's: the second answer comes from a pass that began after the signal was noted, so the
    signal's handler has run by then (or runs at the next bytecode).

    Limits: code in the block that sets a wake-up fd of its own (an agent's loop, asyncio's signal
    handlers) takes the signals' numbers until it puts ours back; a wake-up fd set before the block
    gets none during it; a child forked without exec inherits the wake-up fd and NUDGE's handler
    (the testbed's children exec, and its worker pools spawn). Outside the main thread the block
    does nothing.
    """

    NUDGE = signal.SIGURG            # ignored by default: a nudge left pending after the block is harmless
    NUDGE_S = 0.05                   # the interval between nudges until one has reached Python
    ANSWERS = 2                      # nudges to see answered after a signal (see above)
    _STOP = b"\0"                    # no signal has the number 0

    def __init__(self) -> None:
        self._active = False
        self._answers: queue.SimpleQueue = queue.SimpleQueue()    # put() may be called in a signal handler
        self._closing = threading.Event()

    def __enter__(self) -> "SignalsReachMainThread":
        if threading.current_thread() is not threading.main_thread():
            return self
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._main = threading.main_thread().ident
        self._watcher = threading.Thread(target=self._watch, name="signal-nudge", daemon=True)
        self._saved_nudge = signal.getsignal(self.NUDGE)
        self._saved_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._active = True
        try:                         # a signal handled from here on finds the block undone
            signal.signal(self.NUDGE, self._nudged)
            self._watcher.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._active:
            return
        self._active = False
        self._closing.set()
        self._answers.put(None)      # a watcher waiting for an answer looks at once
        os.write(self._write_fd, self._STOP)
        if self._watcher.is_alive():
            self._watcher.join()
        signal.set_wakeup_fd(self._saved_fd)        # no nudge can come any more
        signal.signal(self.NUDGE, self._saved_nudge)
        os.close(self._read_fd)
        os.close(self._write_fd)

    def _nudged(self, signum, frame) -> None:
        self._answers.put(None)

    def _watch(self) -> None:
        while True:
            numbers = os.read(self._read_fd, 64)
            if self._STOP in numbers or not numbers:
                return
            if all(number == self.NUDGE for number in numbers):
                continue
            for _ in range(self.ANSWERS):
                while not self._answers.empty():
                    self._answers.get_nowait()
                while not self._closing.is_set():
                    signal.pthread_kill(self._main, self.NUDGE)
                    try:
                        self._answers.get(timeout=self.NUDGE_S)
                        break
                    except queue.Empty:
                        pass


def stop_process(proc: subprocess.Popen | None, grace: float = DEFAULT_GRACE_S) -> int | None:
    """End `proc` by its PID: SIGTERM, then SIGKILL if it is still there after `grace` seconds.

    Returns its exit status (None for no process). A process that has already exited is only reaped.
    """
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    return proc.returncode


def descendants(*roots: int) -> list[int]:
    """The PIDs of every process below `roots` now (children, their children, ...), not the roots
    themselves; read from /proc once (a process that ends meanwhile is simply missing)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
