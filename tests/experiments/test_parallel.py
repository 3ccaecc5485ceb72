"""Cases in parallel (experiments/parallel.py): worker processes and a Dask cluster of two workers
on loopback give the same records, record for record, as one case after another; errors and
Ctrl-C stop the others; Mininet runs stay sequential."""
from __future__ import annotations

import io
import os
import json

import pytest

from experiments import parallel, runner
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import parse_scenario
from testbed.clusterfile import ClusterFileError

SMALL = {
    "name": "small", "title": "Small cases", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
    "horizon_s": 1.5, "sample_interval_s": 0.002, "workload": {"kind": "allreduce", "bytes": 262144, "chunk_bytes": 16384},
    "transports": [{"name": "MRC", "mode": "mrc"}, {"name": "RoCE", "mode": "roce"}],
    "variants": [{"label": "clean", "faults": []},
                 {"label": "lossy", "faults": [{"kind": "random_loss", "loss": 0.01, "at": 0}]},
                 {"label": "link killed", "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"}]}],
}


def as_json(record) -> str:
    return json.dumps(record.as_dict(), sort_keys=True)


@pytest.fixture(scope="module")
def cases():
    return parse_scenario(SMALL).cases()


@pytest.fixture(scope="module")
def sequential(cases):
    """Every case's record, one after another in this process."""
    return [as_json(NetsimBackend().run_case(case)) for case in cases]


@pytest.fixture(scope="module")
def two_processes():
    """Two worker processes, started once for the tests that use them (a start costs seconds)."""
    with parallel.open_pool(jobs=2) as pool:
        yield pool


@pytest.mark.slow
def test_worker_processes_give_the_sequential_records_in_case_order(cases, sequential, two_processes):
    stream = io.StringIO()
    pool = two_processes
    assert isinstance(pool, parallel.ProcessPool) and pool.workers == 2
    records = parallel.run_all(pool, parallel.netsim_case, cases, [c.label for c in cases], stream)
    assert [as_json(r) for r in records] == sequential
    lines = stream.getvalue().splitlines()
    assert lines[0] == f"{len(cases)} case(s) on 2 worker processes on this machine"
    assert lines[-1].startswith(f"[{len(cases)}/{len(cases)} done, 0 running] ")
    assert {line.split("] ", 1)[1].rsplit(":", 1)[0] for line in lines[1:]} == {c.label for c in cases}


@pytest.mark.slow
def test_a_dask_cluster_of_two_workers_on_loopback_gives_the_sequential_records(cases, sequential):
    pool = parallel.DaskPool.local(n_workers=2)
    try:
        assert pool.workers == 2
        addresses = list(pool.client.scheduler_info()["workers"]) + [pool.client.scheduler.address]
        assert all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses
        records = parallel.run_all(pool, parallel.netsim_case, cases, [c.label for c in cases], io.StringIO())
        workers_used = pool.client.run(lambda: 1)
    finally:
        pool.close()
    assert len(workers_used) == 2
    assert [as_json(r) for r in records] == sequential


@pytest.mark.slow
def test_the_runner_writes_the_same_raw_records_with_a_pool(tmp_path, cases, monkeypatch, two_processes):
    monkeypatch.setattr(runner.plots, "make_figures", lambda *args, **kwargs: [])     # figures: not what is tested
    scenario = parse_scenario(SMALL)
    runner.run_scenario(scenario, "netsim", "model", tmp_path / "one", quick=False, progress_stream=io.StringIO())
    runner.run_scenario(scenario, "netsim", "model", tmp_path / "two", quick=False,
                        progress_stream=io.StringIO(), pool=two_processes)
    one, two = ((tmp_path / d / "raw.jsonl").read_text() for d in ("one", "two"))
    assert one.count('"type": "case"') == len(cases) and one == two


def test_a_failing_case_stops_the_pool_and_is_raised_naming_it():
    with parallel.open_pool(jobs=2) as pool:
        with pytest.raises(ValueError, match="invalid literal") as info:
            parallel.run_all(pool, int, ["1", "2", "three", "4", "5"], ["a", "b", "c", "d", "e"], io.StringIO())
    if hasattr(info.value, "__notes__"):
        assert info.value.__notes__ == ["(in case c)"]


def test_in_process_results_come_in_item_order_and_ctrl_c_keeps_the_finished_ones():
    assert parallel.run_all(None, lambda x: x * x, [3, 1, 2], stream=io.StringIO()) == [9, 1, 4]

    def work(x):
        if x == 2:
            raise KeyboardInterrupt
        return x
    with pytest.raises(parallel.Interrupted) as info:
        parallel.run_all(parallel.InProcessPool(), work, [0, 1, 2, 3], stream=io.StringIO())
    assert info.value.results == [0, 1]


def test_progress_shows_cases_done_and_running():
    stream = io.StringIO()
    progress = parallel.CaseProgress(3, stream, where="2 worker processes")
    progress.started("a")
    progress.started("b")
    progress.finished("b", 1.25)
    assert stream.getvalue().splitlines() == ["3 case(s) on 2 worker processes", "[1/3 done, 1 running] b: 1.2 s"]


def test_jobs_are_refused_for_mininet_and_bad_counts_a_cluster_is_checked(tmp_path):
    with pytest.raises(ValueError, match="--jobs 2: only netsim cases run in parallel; mininet"):
        parallel.check_options(2, None, "mininet")
    with pytest.raises(ClusterFileError, match="c.yaml: cannot read"):     # mininet spreads over it
        parallel.check_options(1, tmp_path / "c.yaml", "mininet")
    with pytest.raises(ValueError, match="--jobs 0: expected 1 or more"):
        parallel.check_options(0, None)
    parallel.check_options(1, None, "mininet")            # one at a time is what mininet does anyway
    with pytest.raises(ValueError, match="only netsim cases run in parallel"):
        parallel.PooledBackend(parallel.InProcessPool(), [], "mininet", io.StringIO())


def test_mrc_testbed_run_refuses_jobs_on_mininet(tmp_path, capsys):
    import argparse
    from cli import run as cli_run
    path = tmp_path / "small.yaml"
    path.write_text(json.dumps(SMALL))
    parser = argparse.ArgumentParser()
    cli_run.add_arguments(parser)
    args = parser.parse_args([str(path), "--backend", "mininet", "--jobs", "2", "--out", str(tmp_path / "out")])
    assert cli_run.run(args) == 2
    assert "--jobs 2: only netsim cases run in parallel" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        parser.parse_args([str(path), "--jobs", "2", "--cluster", str(path)])     # one or the other


def test_a_cluster_that_cannot_start_is_one_line_naming_the_cluster_file(tmp_path, capsys, monkeypatch):
    """`run --cluster FILE` whose servers refuse SSH: one line naming the cluster file (not the
    scenario) and what failed, with no empty 'the servers said: nothing'."""
    import argparse

    import distributed

    from cli import run as cli_run

    def refused(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")
    monkeypatch.setattr(distributed, "SpecCluster", refused)
    cluster = tmp_path / "unreach.yaml"
    cluster.write_text(json.dumps({"servers": [{"address": "127.0.0.1", "user": "nobody",
                                                "ssh_options": {"Port": 1}}]}))
    path = tmp_path / "small.yaml"
    path.write_text(json.dumps(SMALL))
    parser = argparse.ArgumentParser()
    cli_run.add_arguments(parser)
    args = parser.parse_args([str(path), "--backend", "netsim", "--cluster", str(cluster),
                              "--out", str(tmp_path / "out")])
    assert cli_run.run(args) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"mrc-testbed run: cluster file {cluster}: could not start Dask workers on its servers")
    assert "Connect call failed" in line and "said" not in line and str(path) not in line


@pytest.mark.slow
def test_datacenter_seeds_prints_the_same_figures_with_two_jobs(capsys):
    from experiments import datacenter_seeds
    figures = {}
    for jobs in ("1", "2"):
        assert datacenter_seeds.main(["--quick", "--variant", "incast", "--seeds", "1", "2", "--jobs", jobs]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[-1].startswith("wall time: ") and "for 2 of 2 runs on " in out[-1]
        figures[jobs] = [line.split(" (")[0] for line in out[:-1]]       # without the wall times
    assert len(figures["1"]) == 3 and figures["1"] == figures["2"]


def test_a_ctrl_c_in_a_pooled_run_keeps_the_cases_before_it(tmp_path, monkeypatch):
    monkeypatch.setattr(runner.plots, "make_figures", lambda *args, **kwargs: [])
    real, calls = NetsimBackend.run_case, []

    def run_then_interrupt(self, case, progress=lambda f: None):
        calls.append(case.label)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, case, progress)
    monkeypatch.setattr(NetsimBackend, "run_case", run_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        runner.run_scenario(parse_scenario(SMALL), "netsim", "model", tmp_path, quick=False,
                            progress_stream=io.StringIO(), pool=parallel.InProcessPool())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and [c["variant"] for c in summary["cases"]] == ["clean", "clean"]


def test_a_pooled_backend_hands_records_back_in_the_order_given(cases):
    backend = parallel.PooledBackend(parallel.InProcessPool(), cases[:2], stream=io.StringIO())
    with pytest.raises(ValueError, match="asked out of order"):
        backend.run_case(cases[1])
    assert as_json(backend.run_case(cases[0])) == as_json(NetsimBackend().run_case(cases[0]))


def test_a_worker_that_dies_fails_its_case_instead_of_hanging_the_run():
    from concurrent.futures.process import BrokenProcessPool
    with parallel.open_pool(jobs=2) as pool:
        with pytest.raises(BrokenProcessPool):
            parallel.run_all(pool, os._exit, [3], ["exits"], io.StringIO())


class LastFirstPool:
    """A pool that finishes the cases started last first, and is stopped by a Ctrl-C once only the
    first case is left running."""

    workers = 4
    where = "a test pool"

    def __init__(self) -> None:
        self._started: list = []

    def start(self, index, work, item) -> None:
        self._started.append((index, work, item))

    def next_finished(self):
        if [index for index, _, _ in self._started] == [0]:
            raise KeyboardInterrupt
        index, work, item = self._started.pop()
        return index, True, work(item)

    def stop(self) -> None:
        self._started.clear()

    def close(self) -> None:
        pass


def test_a_ctrl_c_in_a_pooled_run_keeps_the_cases_that_finished_ahead_of_the_one_awaited(tmp_path, monkeypatch):
    monkeypatch.setattr(runner.plots, "make_figures", lambda *args, **kwargs: [])
    scenario = parse_scenario(SMALL)
    planned = [c.label for c in scenario.cases()]
    with pytest.raises(KeyboardInterrupt):
        runner.run_scenario(scenario, "netsim", "model", tmp_path, quick=False, progress_stream=io.StringIO(),
                            pool=LastFirstPool())
    summary = json.loads((tmp_path / "summary.json").read_text())
    kept = [f"{c['variant']} / {c['transport']}" for c in summary["cases"]]
    assert summary["interrupted"] is True and summary["cases_run"] == len(planned) - 1
    assert sorted(kept) == sorted(planned[1:])      # every case but the first, which was still running
