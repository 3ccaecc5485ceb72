"""Running independent netsim cases at once: here one by one, in worker processes on this machine,
or on the servers of a cluster file through Dask's distributed scheduler.

    with open_pool(jobs=2) as pool:       # jobs=1: None, in this process; or cluster="cluster.yaml"
        records = run_all(pool, netsim_case, cases, [c.label for c in cases])

Every pool runs `work(item)` for each item; `in_order` yields, and `run_all` returns, the results
in the order of the items, whatever order they finish in. `PooledBackend` is a backend whose
cases run ahead on a pool (`mrc-testbed run --jobs`/`--cluster`). netsim is deterministic by seed
(no wall clock, no hash order in a record), so a case's record is the same wherever and alongside
whatever it runs.
Mininet cases run in real time on this machine's network: they stay one at a time
(`check_options` refuses --jobs/--cluster for them).

- `InProcessPool`: in this process, one at a time (--jobs 1, the default).
- `ProcessPool`: N worker processes on this machine (--jobs N, ProcessPoolExecutor), started
  fresh (spawn), ignoring Ctrl-C (this process ends them).
- `DaskPool`: a Dask cluster (`distributed`): the servers of a cluster file (--cluster FILE,
  testbed/clusterfile.py) started over SSH with Dask's own SSH deployment, its scheduler on this
  machine; or a `LocalCluster` (the tests).

At most one case per worker is handed out at a time, so "running" is what runs, and a Ctrl-C
cancels only those: `run_all` then raises `Interrupted` with the results that had come.
"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import multiprocessing
import multiprocessing.context
import signal
import socket
import sys
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence, TextIO

from experiments.progress import LiveLine
from testbed.clusterfile import ClusterFile, load_cluster_file

Work = Callable[[Any], Any]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `run_all`: the running cases were abandoned; `results` holds those that
    finished, in the order of the items."""

    def __init__(self, results: list) -> None:
        super().__init__()
        self.results = results


EXIT_INTERRUPTED = 130       # a sweep module stopped by Ctrl-C (after printing what finished)
EXIT_NO_POOL = 2             # a sweep module whose pool or cluster could not start


def sweep_main(main: Callable[[], int], prog: str) -> int:
    """A sweep module's `main()`, with a Ctrl-C outside its runs (starting the pool, drawing) ending
    it as one line and EXIT_INTERRUPTED too."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


class PoolUnavailable(RuntimeError):
    """The pool the options asked for could not start (a cluster's servers unreachable, its workers
    not reaching the scheduler): the message says which and why."""


class CasePool(Protocol):
    """Somewhere cases run: up to `workers` at once."""

    workers: int
    where: str          # for people: "2 worker processes on this machine"

    def start(self, index: int, work: Work, item: Any) -> None:
        """Begin `work(item)`, known as `index`."""

    def next_finished(self) -> tuple[int, bool, Any]:
        """Wait for a started case to end: (index, True, result) or (index, False, its exception)."""

    def stop(self) -> None:
        """Abandon every running case (after an error or a Ctrl-C)."""

    def close(self) -> None:
        """Release the workers."""


class InProcessPool:
    """Runs each case in this process when asked for the next finished one."""

    workers = 1
    where = "this process, one at a time"

    def __init__(self) -> None:
        self._started: deque = deque()

    def start(self, index: int, work: Work, item: Any) -> None:
        self._started.append((index, work, item))

    def next_finished(self) -> tuple[int, bool, Any]:
        index, work, item = self._started.popleft()
        try:
            return index, True, work(item)
        except Exception as error:          # noqa: BLE001 - handed to in_order, which raises it
            return index, False, error

    def stop(self) -> None:
        self._started.clear()

    def close(self) -> None:
        self.stop()


def _ignore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # in a worker: the parent handles Ctrl-C and ends it


class _SpawnKeepingProcesses(multiprocessing.context.SpawnContext):
    """The spawn start method, keeping every process it starts (to end them all at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list = []

    def Process(self, *args, **kwargs):        # noqa: N802 - the name multiprocessing gives it
        process = super().Process(*args, **kwargs)
        self.started.append(process)
        return process


class ProcessPool:
    """`jobs` worker processes on this machine (the standard library's ProcessPoolExecutor: a
    worker that dies fails its case with BrokenProcessPool instead of hanging the run)."""

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"--jobs {jobs}: expected 1 or more")
        self.workers = jobs
        self.where = f"{jobs} worker processes on this machine"
        self._context = _SpawnKeepingProcesses()       # fresh interpreters: no state shared with this one
        self._executor = ProcessPoolExecutor(jobs, mp_context=self._context, initializer=_ignore_ctrl_c)
        self._running: dict = {}                        # future -> index

    def start(self, index: int, work: Work, item: Any) -> None:
        self._running[self._executor.submit(work, item)] = index

    def next_finished(self) -> tuple[int, bool, Any]:
        done, _ = wait(self._running, return_when=FIRST_COMPLETED)
        future = next(iter(done))
        index = self._running.pop(future)
        error = future.exception()
        return (index, True, future.result()) if error is None else (index, False, error)

    def stop(self) -> None:
        """End every worker now (they ignore Ctrl-C, and a case may run for minutes): all of them,
        so that none is left waiting on a queue lock a killed one held."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in self._context.started:
            if process.is_alive():
                process.kill()
        self._running.clear()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class DaskPool:
    """The workers of a Dask cluster (`distributed`), one case per worker thread at a time."""

    def __init__(self, cluster, where: str, expected_workers: int, timeout_s: float = 120.0) -> None:
        from distributed import Client, as_completed
        quiet_dask_logs()
        self.cluster = cluster
        self.client = Client(cluster)
        try:
            self.client.wait_for_workers(expected_workers, timeout=timeout_s)
        except Exception as error:
            came = len(self.client.scheduler_info()["workers"])
            self.close()
            raise RuntimeError(f"{where}: {came} of {expected_workers} workers reached the scheduler within "
                               f"{timeout_s:g} s (can the servers reach it? {type(error).__name__})") from error
        self.workers = sum(self.client.nthreads().values())
        self.where = where
        self._running: dict = {}                   # future -> index
        self._finished = as_completed()

    @classmethod
    def local(cls, n_workers: int = 2) -> "DaskPool":
        """A cluster of `n_workers` single-threaded worker processes on this machine's loopback."""
        from distributed import LocalCluster
        quiet_dask_logs()
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        return cls(cluster, f"a Dask cluster of {n_workers} worker processes on this machine", n_workers)

    @classmethod
    def over_ssh(cls, spec: ClusterFile, timeout_s: float = 120.0) -> "DaskPool":
        """The servers of a cluster file: `cores` single-threaded Dask workers on each, started over
        SSH (Dask's own SSH deployment), the scheduler on this machine at the file's scheduler
        address (default: the address this machine uses towards the first server)."""
        from distributed import Scheduler, SpecCluster
        from distributed.deploy.ssh import Worker as SSHWorker
        quiet_dask_logs()
        address = spec.scheduler_address or local_address_towards(spec.servers[0].address)
        workers = {
            f"server{i}-{server.address}": {
                "cls": SSHWorker,
                "options": {"address": server.address, "connect_options": server.connect_options(),
                            "kwargs": {"n_workers": server.cores, "nthreads": 1, **_listen_on(server.address)},
                            "remote_python": server.python or sys.executable}}
            for i, server in enumerate(spec.servers)}
        scheduler = {"cls": Scheduler, "options": {"host": address, "port": spec.scheduler_port,
                                                   "dashboard_address": None}}
        with _RemoteOutput() as remote:
            try:
                cluster = SpecCluster(workers=workers, scheduler=scheduler, name=f"mrc-testbed {spec.path}")
            except Exception as error:
                said = f"; the servers said: {'; '.join(remote.lines)}" if remote.lines else ""
                raise RuntimeError(f"cluster file {spec.path}: could not start Dask workers on its servers over "
                                   f"SSH ({type(error).__name__}: {error}){said}") from error
        where = (f"{spec.cores} Dask workers on {len(spec.servers)} server(s) of {spec.path} "
                 f"(scheduler at {address})")
        return cls(cluster, where, spec.cores, timeout_s)

    def start(self, index: int, work: Work, item: Any) -> None:
        future = self.client.submit(work, item, pure=False)
        self._running[future] = index
        self._finished.add(future)

    def next_finished(self) -> tuple[int, bool, Any]:
        future = next(self._finished)
        index = self._running.pop(future)
        try:
            return index, True, future.result()
        except Exception as error:          # noqa: BLE001 - the case's own error, raised by in_order
            return index, False, error

    def stop(self) -> None:
        if self._running:
            self.client.cancel(list(self._running))
            self._running.clear()

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def _listen_on(address: str) -> dict:
    """Where a server's workers listen: its SSH address when that is an IP address (127.0.0.1 stays
    on loopback); for a host name, Dask's choice (every interface, announcing the one towards the
    scheduler), since the name may mean something else on the server itself."""
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return {}
    return {"host": address}


class _RemoteOutput(logging.Handler):
    """While in a `with`: the last lines the servers printed while their workers started (Dask's SSH
    deployment logs them at INFO, which the console does not show), to say why a start failed."""

    LOGGER = "distributed.deploy.ssh"

    def __init__(self, keep: int = 6) -> None:
        super().__init__(logging.INFO)
        self.lines: deque = deque(maxlen=keep)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage().strip())

    def __enter__(self) -> "_RemoteOutput":
        logger = logging.getLogger(self.LOGGER)
        self._saved = logger.level, logger.propagate
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logger = logging.getLogger(self.LOGGER)
        logger.removeHandler(self)
        logger.level, logger.propagate = self._saved


def quiet_dask_logs() -> None:
    """Dask's and asyncssh's loggers from WARNING up only (they say INFO for every worker and
    connection), as testbed/logs.py does for every library."""
    for name in ("distributed", "asyncssh"):
        logging.getLogger(name).setLevel(logging.WARNING)


def local_address_towards(host: str) -> str:
    """The address of this machine its route towards `host` leaves from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, 9))
        except OSError as error:
            raise RuntimeError(f"no route from this machine towards {host} ({error}); "
                               "give `scheduler: {address: ...}` in the cluster file") from None
        return probe.getsockname()[0]


class CaseProgress:
    """Cases done and running, on one line of a terminal (experiments.progress.LiveLine); a line
    per finished case elsewhere."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO = sys.stderr, where: str = "") -> None:
        self.total = total
        self.stream = stream
        self.line = LiveLine(stream)
        self.tty = self.line.tty
        self.done_count = 0
        self.running = 0
        if where:
            self._write(f"{total} case(s) on {where}\n")

    def started(self, label: str) -> None:
        self.running += 1
        self._show(f"started {label}")

    def finished(self, label: str, wall_s: float, replaced_by: Sequence[str] = ()) -> None:
        """Case `label` ended after `wall_s` seconds; the cases `replaced_by` started in its place."""
        self.running += len(replaced_by) - 1
        self.done_count += 1
        self._show(f"{label}: {wall_s:.1f} s")

    def close(self) -> None:
        self.line.close()

    def _show(self, event: str) -> None:
        counts = f"{self.done_count}/{self.total} done, {self.running} running"
        if self.tty:
            filled = int(self.done_count / max(1, self.total) * self.WIDTH)
            self.line.show(f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {counts}  {event[:60]}")
        elif event.startswith("started"):
            return                             # a line per finished case is enough in a log
        else:
            self._write(f"[{counts}] {event}\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def describe(pool: Optional[CasePool]) -> str:
    """Where `pool` runs cases, for people ("this process, one at a time" for None)."""
    return pool.where if pool is not None else InProcessPool.where


def in_order(pool: Optional[CasePool], work: Work, items: Sequence, labels: Optional[Sequence[str]] = None,
             stream: TextIO = sys.stderr, walls: Optional[dict] = None, ahead: Optional[dict] = None) -> Iterator:
    """`work(item)` for every item on `pool` (None: in this process), at most `pool.workers` at
    once, with cases done and running on `stream`: yields the results in the order of `items`, each
    once it and those before it have finished. A case's exception stops the others and is raised
    (naming the case); so does a Ctrl-C, or closing the iterator early. `walls`, when given, gets
    each item's index -> the wall seconds from its start on the pool to its end; `ahead`, when given,
    holds the results that finished before an earlier item's (index -> result), not yielded yet:
    what a caller stopped by a Ctrl-C may still keep."""
    pool = pool or InProcessPool()
    labels = list(labels) if labels is not None else [f"case {i + 1}" for i in range(len(items))]
    progress = CaseProgress(len(items), stream, where=pool.where)
    finished: dict[int, Any] = ahead if ahead is not None else {}
    waiting = deque(range(len(items)))
    began: dict[int, float] = {}

    def start_while_workers_free(announce: bool = True) -> list[str]:
        """Start cases while a worker is free; return their labels (`announce`: show each)."""
        started = []
        while waiting and len(began) < pool.workers:
            index = waiting.popleft()
            pool.start(index, work, items[index])
            began[index] = time.monotonic()
            started.append(labels[index])
            if announce:
                progress.started(labels[index])
        return started
    try:
        for next_index in range(len(items)):
            while next_index not in finished:
                start_while_workers_free()
                index, ok, value = pool.next_finished()
                wall = time.monotonic() - began.pop(index)
                if not ok:
                    if hasattr(value, "add_note"):
                        value.add_note(f"(in case {labels[index]})")
                    raise value
                finished[index] = value
                if walls is not None:
                    walls[index] = wall
                replacing = start_while_workers_free(announce=False)   # "running" then counts what runs
                progress.finished(labels[index], wall, replacing)
            yield finished.pop(next_index)
    except GeneratorExit:              # the caller is done with us: stop what still runs, if anything
        if began or waiting:
            pool.stop()
        raise
    except BaseException:              # a case's error or a Ctrl-C
        pool.stop()
        raise
    finally:
        progress.close()


def run_all(pool: Optional[CasePool], work: Work, items: Sequence, labels: Optional[Sequence[str]] = None,
            stream: TextIO = sys.stderr) -> list:
    """Every result of `in_order`, in the order of `items`; a Ctrl-C raises `Interrupted` with
    those that had come (the results up to the first unfinished case)."""
    results: list = []
    try:
        for result in in_order(pool, work, items, labels, stream):
            results.append(result)
    except KeyboardInterrupt:
        raise Interrupted(results) from None
    return results


@dataclass(frozen=True)
class Sweep:
    """What `sweep` ran: the results in the order of the items (only those up to the first
    unfinished one when `interrupted`), and where they ran."""

    results: list
    where: str
    interrupted: bool = False


def sweep(jobs: int, cluster: Optional[Path], work: Work, items: Sequence,
          labels: Optional[Sequence[str]] = None, stream: TextIO = sys.stderr) -> Sweep:
    """`run_all` on the pool --jobs/--cluster ask for (a sweep module's runs): a Ctrl-C keeps the
    results that had come (`interrupted`); a pool that cannot start raises `PoolUnavailable`."""
    with open_pool(jobs, cluster) as pool:
        where = describe(pool)
        try:
            return Sweep(run_all(pool, work, items, labels, stream), where)
        except Interrupted as stop:
            return Sweep(stop.results, where, interrupted=True)


def netsim_case(case):
    """The record of `case` on the netsim backend (what a worker runs for `mrc-testbed run`)."""
    from experiments.backends.netsim_backend import NetsimBackend
    return NetsimBackend().run_case(case)


class PooledBackend:
    """The netsim backend with the cases running ahead on a pool: `run_case` hands back each
    case's record once it has finished, the cases asked for in the order given (the runner's loop
    stays as it is: experiments/runner.py)."""

    name = "netsim"

    def __init__(self, pool: CasePool, cases: Sequence, backend: str = "netsim", stream: TextIO = sys.stderr) -> None:
        if backend != "netsim":
            raise ValueError(f"only netsim cases run in parallel; {backend} cases run one at a time")
        self._cases = list(cases)
        self._walls: dict[int, float] = {}
        self._ahead: dict[int, Any] = {}            # records finished before an earlier case's
        self._records = in_order(pool, netsim_case, self._cases, [c.label for c in self._cases], stream,
                                 self._walls, self._ahead)
        self._taken = 0

    def run_case(self, case, progress: Callable[[float], None] = lambda fraction: None):
        """The record of `case`, the next of the cases given (waiting for it to finish)."""
        if self._taken >= len(self._cases) or case != self._cases[self._taken]:
            raise ValueError(f"case {case.label!r} asked out of order: the pool runs the given cases in order")
        record = next(self._records)
        self._taken += 1
        progress(1.0)
        return record

    def finished_ahead(self) -> list[tuple[Any, Any]]:
        """(case, record) of the cases that finished on the pool but were not handed back yet,
        because an earlier case had not finished: what a run stopped by a Ctrl-C still keeps."""
        return [(self._cases[index], self._ahead[index]) for index in sorted(self._ahead)]

    def took(self, index: int) -> float:
        """The wall seconds the case at `index` of the cases given, handed back already, ran on the
        pool (not the wait for it)."""
        if not 0 <= index < self._taken:
            raise ValueError(f"case {index} has not been handed back yet ({self._taken} have)")
        return self._walls[index]


# --- command-line options ------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser, mininet: bool = True) -> None:
    """--jobs N and --cluster FILE (one or the other); `mininet`: the command has a mininet backend
    (its --cluster help says what the option does there)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                       help="run N netsim cases at once in worker processes on this machine (default 1)")
    spread = ("; on the mininet backend each case's network is spread over them (Mininet's cluster edition)"
              if mininet else "")
    group.add_argument("--cluster", type=Path, default=None, metavar="FILE",
                       help="the servers of this cluster file (testbed/clusterfile.py): netsim cases run "
                            f"there through Dask over SSH{spread}")


@contextmanager
def open_pool(jobs: int = 1, cluster: Optional[Path] = None) -> Iterator[Optional[CasePool]]:
    """The pool the options ask for, closed on leaving; None for --jobs 1 without a cluster (the
    cases run in this process, as they always did)."""
    if cluster is None and jobs == 1:
        yield None
        return
    try:
        pool: CasePool = DaskPool.over_ssh(load_cluster_file(cluster)) if cluster is not None else ProcessPool(jobs)
    except RuntimeError as error:
        raise PoolUnavailable(str(error)) from error
    try:
        yield pool
    finally:
        pool.close()


def check_options(jobs: int, cluster: Optional[Path], backend: str = "netsim") -> None:
    """Raise ValueError when --jobs/--cluster cannot apply (a count below 1, --jobs on a backend
    other than netsim, --cluster on htsim), before anything starts. --cluster on the mininet backend spreads each case's
    network over the servers (testbed/cluster.py) instead of running cases side by side."""
    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: expected 1 or more")
    if backend == "htsim" and (jobs > 1 or cluster is not None):
        option = f"--jobs {jobs}" if jobs > 1 else f"--cluster {cluster}"
        raise ValueError(f"{option}: htsim cases run one at a time on this machine, each one htsim_uec process "
                         "(the pool of --jobs and the servers of --cluster run netsim cases); drop the option")
    if backend != "netsim" and jobs > 1:
        raise ValueError(f"--jobs {jobs}: only netsim cases run in parallel; {backend} cases run in real time "
                         "on the network, one at a time (drop the option or add --backend netsim)")
    if cluster is not None:
        load_cluster_file(cluster)          # its errors now, before the scenario runs
