"""`mrc-testbed crosscheck` as a user reads it: one row per case (each MRC transport its own), how
an unfinished or failed run ended, the seeds and sizes actually run, what cannot run refused up
front. htsim_uec is the stand-in tests/data/htsim_standin.py (its output format, a toy model)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from experiments.crosscheck import NETSIM, Crosscheck, split_mappable, table_lines, write_results
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
INCAST = ROOT / "experiments" / "incast.yaml"          # MRC + trimming, MRC drop-tail, RoCE
STANDIN = ROOT / "tests" / "data" / "htsim_standin.py"


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setenv("HTSIM_UEC", str(STANDIN))
    monkeypatch.delenv("STANDIN_MODE", raising=False)
    return str(STANDIN)


def crosscheck(tmp_path, path=INCAST, balancers=("mixed",), seeds=(1,), variants=()):
    """Run and write a crosscheck; (its summary.json, summary.md text, rows, records)."""
    records, rows, skipped = Crosscheck(balancers).run(path, list(seeds), quick=True, variants=variants)
    scenario = load_scenario(path, quick=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no matplotlib warning on the console
        write_results(scenario, records, rows, skipped, tmp_path,
                      {"seeds": list(seeds), "settings": "scenario", "quick": True})
    return (json.loads((tmp_path / "summary.json").read_text()), (tmp_path / "summary.md").read_text(),
            rows, records)


def test_each_mrc_transport_is_its_own_row_and_a_mean_is_over_seeds_only(standin, tmp_path):
    summary, md, rows, records = crosscheck(tmp_path, seeds=(1, 2))
    table = {row["case"]: row for row in summary["crosscheck"]}
    assert set(table) == {"leafspine:5x2x2 / MRC + trimming", "leafspine:5x2x2 / MRC drop-tail"}
    for row in table.values():
        netsim = row["columns"][NETSIM]
        assert netsim["seeds"] == [1, 2] and len(netsim["slowest_over_ideal"]) == 2     # one value per seed
        assert netsim["mean"] == pytest.approx(sum(netsim["slowest_over_ideal"]) / 2)
    trimming = table["leafspine:5x2x2 / MRC + trimming"]["columns"][NETSIM]["slowest_over_ideal"]
    drop_tail = table["leafspine:5x2x2 / MRC drop-tail"]["columns"][NETSIM]["slowest_over_ideal"]
    assert trimming != drop_tail
    # the per-case table says which simulator ran which transport
    transports = {r.transport for r in records}
    assert {"netsim: MRC + trimming", "netsim: MRC drop-tail", "htsim mixed: MRC drop-tail"} <= transports
    assert "| leafspine:5x2x2 / MRC drop-tail |" in md


def test_the_header_titles_and_table_say_the_seeds_and_sizes_run(standin, tmp_path):
    summary, md, _, _ = crosscheck(tmp_path, path=DATACENTER, seeds=(1, 2), variants=("incast",))
    title = summary["title"]
    assert "256 KiB flows" in title and "incast" in title and "seeds 1, 2" in title
    assert "2 MB" not in title and "failover" not in title and "permutation" not in title
    assert md.splitlines()[0] == f"# {title}"
    assert "seeds 1, 2, quick" in md                            # the header names every seed
    header = next(line for line in md.splitlines() if line.startswith("| variant"))
    assert header.split(" | ")[2] == "seed"
    seeds = [line.split(" | ")[2] for line in md.splitlines() if line.startswith("| incast | ")]
    assert sorted(seeds) == ["1", "1", "2", "2"]
    # the description says what this crosscheck is before what the scenario file says of all its cases
    assert summary["description"].startswith("The cases of datacenter that htsim_uec can express, run on netsim")


def test_a_run_htsim_cut_at_its_horizon_reads_cut_not_stuck(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_MODE", "unfinished")
    summary, md, _, _ = crosscheck(tmp_path, path=DATACENTER, variants=("incast",))
    column = summary["crosscheck"][0]["columns"]["htsim mixed"]
    assert column["outcomes"] == ["cut at horizon"] and column["mean"] is None
    assert "cut at horizon (seed 1)" in "\n".join(table_lines(summary["crosscheck"]))
    htsim = next(c for c in summary["cases"] if c["transport"].startswith("htsim"))
    assert htsim["ending"] == "cut at horizon" and htsim["delivered_fraction"] is None
    row = next(line for line in md.splitlines() if line.startswith("| incast | htsim mixed: MRC |"))
    assert "cut at horizon" in row and "never" not in row and "stuck" not in row and "0 %" not in row


def test_a_panel_without_a_finished_flow_says_so_and_coinciding_lines_are_named(standin, tmp_path, monkeypatch):
    # the stand-in's toy model gives every balancer the same times: their lines coincide
    _, _, rows, _ = crosscheck(tmp_path, path=DATACENTER, balancers=("oblivious", "bitmap"), variants=("incast",))
    from experiments.crosscheck import cdf_figure
    from experiments.plots import plt
    captured = {}
    monkeypatch.setattr("experiments.plots.save_figure", lambda fig, path, title, fontsize: captured.setdefault("fig", fig))
    cdf_figure(rows, tmp_path / "a.png", "t")
    labels = captured["fig"].axes[0].get_legend_handles_labels()[1]
    assert "htsim bitmap (= htsim oblivious)" in labels
    styles = {line.get_linestyle() for line in captured["fig"].axes[0].get_lines()}
    assert len(styles) == 3                                   # netsim and the two balancers each drawn apart
    plt.close(captured.pop("fig"))
    monkeypatch.setenv("STANDIN_MODE", "unfinished")
    _, rows, _ = Crosscheck(("mixed",)).run(DATACENTER, [1], quick=True, variants=("incast",))
    rows[0].ratios.clear()                                    # as when netsim is cut too: nothing finished
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cdf_figure(rows, tmp_path / "b.png", "t")
    texts = [t.get_text() for t in captured["fig"].axes[0].texts]
    assert any(t.startswith("no run finished all its flows") for t in texts)


def test_reps_on_drop_tail_is_skipped_up_front_and_the_other_balancers_run(standin, tmp_path):
    scenario = load_scenario(INCAST, quick=True)
    ok, refused = split_mappable(scenario.cases(), ("mixed", "reps"))
    assert [(case.transport.name, balancers) for case, balancers in ok] == [
        ("MRC + trimming", ("mixed", "reps")), ("MRC drop-tail", ("mixed",))]
    assert [label for label, _ in refused] == ["leafspine:5x2x2 / MRC drop-tail, htsim reps",
                                               "leafspine:5x2x2 / RoCE (drop-tail)"]
    assert "needs trimming" in refused[0][1]


def test_one_failing_htsim_run_is_reported_and_the_others_still_run(standin, tmp_path, monkeypatch, capsys):
    from cli.main import main
    monkeypatch.setenv("STANDIN_MODE", "fail-bitmap")
    out = tmp_path / "r"
    assert main(["crosscheck", str(DATACENTER), "--quick", "--variant", "incast", "--balancer", "bitmap",
                 "--balancer", "mixed", "--out", str(out)]) == 1
    streams = capsys.readouterr()
    assert "1 run(s) failed" in streams.err and "incast / MRC, htsim bitmap, seed 1" in streams.err
    assert "stand-in asked to fail" in streams.err                # htsim_uec's own words
    assert "it said: Failed to load connection matrix (stand-in asked to fail)" in streams.err
    summary = json.loads((out / "summary.json").read_text())
    columns = summary["crosscheck"][0]["columns"]
    assert columns["htsim bitmap"]["outcomes"] == ["failed"] and columns["htsim mixed"]["outcomes"] == ["completed"]
    assert columns[NETSIM]["mean"] is not None
    assert summary["failed"][0]["column"] == "htsim bitmap" and "stand-in asked to fail" in summary["failed"][0]["error"]
    md = (out / "summary.md").read_text()
    assert "failed (seed 1)" in md and "Failed runs:" in md


def test_a_crosscheck_with_nothing_htsim_can_run_exits_2_naming_each_case(standin, tmp_path, capsys):
    from cli.main import main
    out = tmp_path / "r"
    assert main(["crosscheck", str(ROOT / "experiments" / "failover.yaml"), "--quick", "--out", str(out)]) == 2
    streams = capsys.readouterr()
    assert "no case htsim_uec can run" in streams.err and "collective" in streams.err
    assert "results:" not in streams.out and not out.exists()


def test_a_ctrl_c_keeps_the_runs_that_finished_marked_interrupted(standin, tmp_path, monkeypatch, capsys):
    # incast.yaml quick has two cases htsim maps; netsim's run of the second is cut by a Ctrl-C
    from cli.main import main
    from experiments.backends.netsim_backend import NetsimBackend
    real, calls = NetsimBackend.run_case, []

    def cut_second(self, case, progress=lambda fraction: None):
        calls.append(case.label)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, case, progress)
    monkeypatch.setattr(NetsimBackend, "run_case", cut_second)
    out = tmp_path / "r"
    assert main(["crosscheck", str(INCAST), "--quick", "--balancer", "mixed", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted; raw.jsonl, summary.json, summary.md of the 2 finished run(s) are in {out}" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and len(summary["cases"]) == 2
    assert [row["case"] for row in summary["crosscheck"]] == ["leafspine:5x2x2 / MRC + trimming"]
    assert len([line for line in (out / "raw.jsonl").read_text().splitlines() if '"type": "case"' in line]) == 2
    assert "**Interrupted (Ctrl-C or SIGTERM)" in (out / "summary.md").read_text()


def test_the_results_are_written_before_the_figure_and_a_ctrl_c_while_drawing_says_so(
        standin, tmp_path, monkeypatch):
    from experiments import crosscheck as module
    records, rows, skipped = Crosscheck(("mixed",)).run(INCAST, [1], quick=True, variants=())
    seen = {}

    def interrupted_drawing(rows, path, title):
        seen["written"] = sorted(p.name for p in path.parent.iterdir())
        raise KeyboardInterrupt
    monkeypatch.setattr(module, "cdf_figure", interrupted_drawing)
    with pytest.raises(KeyboardInterrupt):
        write_results(load_scenario(INCAST, quick=True), records, rows, skipped, tmp_path,
                      {"seeds": [1], "settings": "scenario", "quick": True})
    assert {"raw.jsonl", "summary.json", "summary.md"} <= set(seen["written"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["figures_missing"] == ["crosscheck-cdf.png"] and len(summary["cases"]) == len(records)
    md = (tmp_path / "summary.md").read_text()
    assert "Figures not drawn" in md and "netsim and htsim side by side" in md
