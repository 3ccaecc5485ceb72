"""The sweep modules `python -m experiments.datacenter_seeds` and `python -m experiments.ecn_ramp_sweep`:
what they print and write, a Ctrl-C and a cluster that cannot start (their runs are faked here)."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments import datacenter_seeds, ecn_ramp_sweep, parallel

ROOT = Path(__file__).resolve().parents[2]


def interrupted_after(count: int, result):
    """A stand-in for a sweep's work: `result` for the first `count` runs, then a Ctrl-C."""
    calls = []

    def work(item):
        calls.append(item)
        if len(calls) > count:
            raise KeyboardInterrupt
        return result
    return work


@pytest.fixture
def unreachable_cluster(tmp_path, monkeypatch):
    """A well-formed cluster file whose servers never start workers."""
    def refuse(spec, timeout_s=120.0):
        raise RuntimeError(f"{spec.path}: could not start Dask workers on the servers (OSError: refused)")
    monkeypatch.setattr(parallel.DaskPool, "over_ssh", classmethod(lambda cls, spec, timeout_s=120.0: refuse(spec)))
    path = tmp_path / "cluster.yaml"
    path.write_text("servers:\n  - {address: 127.0.0.1, user: nobody}\n")
    return path


# --- datacenter_seeds ----------------------------------------------------------------------------
def test_the_table_has_no_htsim_column_and_says_where_htsim_is(capsys):
    items = [("tuned on", datacenter_seeds.Item("incast", s, profile="htsim-defaults")) for s in (1, 2)]
    datacenter_seeds.print_table(items, [([1.0, 1.04], 0.1), ([1.0, 1.02], 0.1)])
    out = capsys.readouterr().out
    assert "htsim " not in out.splitlines()[1] and "1.026" not in out       # no hard-coded htsim figure
    assert datacenter_seeds.CROSSCHECK in out


def test_table_columns_line_up_under_their_headers_on_long_labels():
    items = [("tuned on", datacenter_seeds.Item("permutation", 1)),
             ("held out", datacenter_seeds.Item("permutation, gray spine", 9, label="permutation, gray spine, 256 KiB flows"))]
    lines = datacenter_seeds.table_lines(items, [([1.0, 1.05], 0.1), ([1.0, 1.5], 0.1)])
    header, rows = lines[0], lines[1:]
    for column in ("switches", "case"):                    # left-aligned: starts where its header does
        start = header.index(column)
        assert all(row[start - 2:start] == "  " and row[start] != " " for row in rows), (column, lines)
    end = header.index("worst") + len("worst")             # right-aligned: ends where its header does
    assert [row[end - 5:end] for row in rows] == ["1.050", "1.500"]
    assert rows[1].split()[:3] == ["held", "out", "scenario"]


def test_each_seed_shows_its_wall_time_as_measured():
    items = [datacenter_seeds.Item("incast", 1)]
    lines = datacenter_seeds.seed_lines(items, [([1.0, 1.03], 0.21)], ["scenario"], ["incast"])
    assert "(210 ms wall)" in lines[0] and "0 s wall" not in lines[0]


def test_a_ctrl_c_prints_the_finished_seeds_and_exits_130(monkeypatch, capsys):
    monkeypatch.setattr(datacenter_seeds, "timed_run", interrupted_after(1, ([1.0, 1.03], 0.2)))
    assert datacenter_seeds.main(["--variant", "incast", "--seeds", "1", "2", "3"]) == 130
    out, err = capsys.readouterr()
    assert "incast  seed 1: slowest 1.030x" in out and "seed 2" not in out
    assert "interrupted: 1 of 3 runs finished" in err and "Traceback" not in err


def test_a_cluster_that_cannot_start_is_one_line_and_exit_2(unreachable_cluster, capsys):
    assert datacenter_seeds.main(["--variant", "incast", "--seeds", "1", "--cluster", str(unreachable_cluster)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{datacenter_seeds.PROG}: ") and "could not start" in err[0]


def test_seeds_and_cluster_help_say_what_they_do(capsys):
    with pytest.raises(SystemExit):
        datacenter_seeds.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the seeds to run (default 1 2 3 4" in text and "mininet" not in text


# --- ecn_ramp_sweep ------------------------------------------------------------------------------
def fake_plot(results, path, title):
    path.write_text(title)


def test_the_sweep_writes_a_results_folder_not_the_committed_figure(tmp_path, monkeypatch, capsys):
    committed = ROOT / "experiments" / "figures" / "ecn-ramp-sweep.json"
    before = committed.read_bytes()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ecn_ramp_sweep, "run_one", lambda item: 1.25)
    monkeypatch.setattr(ecn_ramp_sweep, "plot", fake_plot)
    assert ecn_ramp_sweep.main(["--quick"]) == 0
    written = list((tmp_path / "results").glob("ecn-ramp-sweep-*/ecn-ramp-sweep.json"))
    assert len(written) == 1 and committed.read_bytes() == before
    assert len(capsys.readouterr().out.splitlines()) == len(ecn_ramp_sweep.PAIRS) + 1
    assert ecn_ramp_sweep.main(["--quick", "--out", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "ecn-ramp-sweep.png").exists()


def test_a_ctrl_c_prints_the_finished_settings_writes_nothing_and_exits_130(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ecn_ramp_sweep, "run_one", interrupted_after(4, 1.1))     # one setting and a bit
    assert ecn_ramp_sweep.main(["--quick", "--out", str(tmp_path / "out")]) == 130
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ECN  8..8 ") and lines[0].count(": 1.100x") == 3
    assert "interrupted: 4 of 42 runs finished (1 of 14 settings above); nothing written" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_the_sweep_on_a_cluster_that_cannot_start_is_one_line_and_exit_2(unreachable_cluster, tmp_path, capsys):
    assert ecn_ramp_sweep.main(["--quick", "--cluster", str(unreachable_cluster), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{ecn_ramp_sweep.PROG}: ")


def test_the_sweeps_help_is_whole_and_says_what_out_and_cluster_do(capsys):
    with pytest.raises(SystemExit):
        ecn_ramp_sweep.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "cases where the marking decides the result." in text
    assert "--out FOLDER where ecn-ramp-sweep.json and .png go (default: a new results/" in text
    assert "mininet" not in text
