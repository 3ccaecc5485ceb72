"""`mrc-testbed report --paper`: each paper statement beside the newest measured figures."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cli import report, run as run_cmd
from experiments.paper import CLAIMS

ROOT = Path(__file__).resolve().parents[2]


def paper_args(results: Path, output=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    argv = ["--results", str(results), "--paper"] + (["-o", str(output)] if output else [])
    return parser.parse_args(argv)


@pytest.mark.slow
def test_paper_page_puts_the_loss_sweep_beside_the_statement_and_says_what_was_not_run(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    args = parser.parse_args([str(ROOT / "experiments" / "loss-sweep.yaml"), "--quick", "--backend", "netsim",
                              "--out", str(tmp_path / "sweep"), "--variant", "allreduce 8 MiB 1% loss"])
    assert run_cmd.run(args) == 0
    assert report.run(paper_args(tmp_path)) == 0
    assert "beside 1 measured scenario(s)" in capsys.readouterr().out
    page = (tmp_path / "paper.md").read_text()
    loss = page.split("## Loss")[1].split("\n## ")[0]
    assert "at 1 % loss RoCE is unusable while MRC keeps about a third" in loss
    assert "- goodput: payload bytes received per second, summed" in loss
    assert "- allreduce 8 MiB 1% loss: MRC " in loss and "MRC/RoCE " in loss and "bit/s" in loss
    assert "backend netsim" in loss and "quick" in loss and "`sweep`" in loss
    assert "Why it differs at lab scale:** Go-back-N throws away about a bandwidth-delay product" in loss
    assert page.count("**Paper:**") == len(CLAIMS)
    gray = page.split("## A gray path")[1].split("\n## ")[0]
    assert "not run: no results folder of `gray`" in gray and "mrc-testbed run experiments/gray.yaml" in gray


def test_paper_page_must_be_markdown(tmp_path, capsys):
    assert report.run(paper_args(tmp_path, tmp_path / "paper.html")) == 2
    assert "the --paper page is markdown" in capsys.readouterr().err


def loss_case(variant: str, transport: str, mode: str, goodput: float) -> dict:
    return {"variant": variant, "transport": transport, "mode": mode, "mean_goodput_bps": goodput, "completed": True}


def test_the_loss_claim_takes_its_figures_from_the_results_not_from_fixed_prose():
    from experiments.paper import loss_sweep_figures
    summary = {"cases": [loss_case("allreduce 8 MiB 0% loss", "MRC", "mrc", 1000e9),
                         loss_case("allreduce 8 MiB 0% loss", "RoCE 1 QP", "roce", 1000e9),
                         loss_case("allreduce 8 MiB 1% loss", "MRC", "mrc", 730e9),
                         loss_case("allreduce 8 MiB 1% loss", "RoCE 1 QP", "roce", 200e9)]}
    lines = loss_sweep_figures(summary)
    assert "allreduce 8 MiB 1% loss: MRC 730 Gbit/s, RoCE 200 Gbit/s; MRC/RoCE 3.65x" in lines
    assert "allreduce 8 MiB 1% loss: MRC kept 73% of its goodput at 0 % loss" in lines
    loss = next(c for c in CLAIMS if c.scenario == "loss-sweep")
    assert not any(figure in loss.differs for figure in ("3.5", "3.0", "75 %"))


def test_report_of_a_folder_without_results_fails_with_one_error_and_writes_nothing(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    assert report.run(parser.parse_args(["--results", str(tmp_path)])) == 1
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and "mrc-testbed report: no results folder (with summary.json)" in said.err
    assert "report of" not in said.out and not (tmp_path / "report.html").exists()


def repeated_summary() -> dict:
    """A loss sweep run twice (seeds 1 and 2) whose representative runs mix seeds: MRC's of seed 2,
    RoCE's of seed 1."""
    runs = []
    for repetition, (mrc_free, roce_free, mrc_lossy, roce_lossy) in enumerate(((700e9, 560e9, 490e9, 200e9),
                                                                               (720e9, 270e9, 576e9, 180e9))):
        for case in (loss_case("alltoall 1 MiB 0% loss", "MRC", "mrc", mrc_free),
                     loss_case("alltoall 1 MiB 0% loss", "RoCE 1 QP", "roce", roce_free),
                     loss_case("alltoall 1 MiB 1% loss", "MRC", "mrc", mrc_lossy),
                     loss_case("alltoall 1 MiB 1% loss", "RoCE 1 QP", "roce", roce_lossy)):
            runs.append(dict(case, seed=repetition + 1, repetition=repetition))
    shown = [runs[4], runs[1], runs[2], runs[3]]         # each case's representative run
    return {"scenario": "loss-sweep", "seed": 1, "repeat": 2, "seeds": [1, 2], "cases": shown, "runs": runs}


def test_a_repeated_loss_sweep_takes_each_ratio_within_one_seed_and_gives_median_and_range():
    from experiments.paper import loss_sweep_figures
    lines = loss_sweep_figures(repeated_summary())
    free = next(line for line in lines if line.startswith("alltoall 1 MiB 0% loss: MRC/RoCE"))
    # seed 1: 700/560 = 1.25x; seed 2: 720/270 = 2.67x (the representatives' 720/560 = 1.29x is no run's)
    assert "MRC/RoCE 1.96x (median of 2 runs, 1.25x-2.67x)" in free and "1.29x" not in free
    assert "alltoall 1 MiB 1% loss: MRC kept 75% (median of 2 runs, 70%-80%) of its goodput at 0 % loss" in lines


def write_run(folder: Path, summary: dict) -> Path:
    import json
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_the_page_says_how_many_runs_and_seeds_a_repeated_run_had(tmp_path):
    from experiments.paper import render_paper
    summary = dict(repeated_summary(), scenario_file="experiments/loss-sweep.yaml", quick=True,
                   backend="netsim", created="2026-01-02 00:00:00 UTC")
    write_run(tmp_path / "rep", summary)
    page = render_paper(tmp_path, tmp_path / "paper.md")[0]
    assert "`rep`: backend netsim, 2 runs, seeds 1-2, quick" in page


def sweep_summary(cases: list[tuple[str, str]], created: str) -> dict:
    modes = {"MRC": "mrc", "RoCE 1 QP": "roce"}
    return {"scenario": "loss-sweep", "scenario_file": str(ROOT / "experiments" / "loss-sweep.yaml"),
            "quick": True, "backend": "netsim", "seed": 1, "created": created, "interrupted": False,
            "cases": [loss_case(v, t, modes.get(t, "mrc"), 100e9) for v, t in cases]}


def test_the_page_takes_the_newest_run_of_all_the_cases_over_a_newer_subset_and_says_so(tmp_path, capsys):
    from experiments.scenario import load_scenario
    every = [(c.variant.label, c.transport.name)
             for c in load_scenario(ROOT / "experiments" / "loss-sweep.yaml", quick=True).cases()]
    write_run(tmp_path / "whole", sweep_summary(every, "2026-01-01 00:00:00 UTC"))
    write_run(tmp_path / "subset", sweep_summary(every[:1], "2026-01-02 00:00:00 UTC"))
    assert report.run(paper_args(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "subset passed over: a subset of the scenario's cases, 1 of 8, made with --variant/--transport" in out
    loss = (tmp_path / "paper.md").read_text().split("## Loss")[1].split("\n## ")[0]
    assert "**Lab** (`whole`:" in loss and "MRC/RoCE 1.00x" in loss
    (tmp_path / "whole" / "summary.json").unlink()          # only the subset left: taken, and said to be one
    assert report.run(paper_args(tmp_path)) == 0
    loss = (tmp_path / "paper.md").read_text().split("## Loss")[1].split("\n## ")[0]
    assert "**Lab** (`subset`:" in loss and "; only a subset of the scenario's cases, 1 of 8, made" in loss


def test_paper_of_a_folder_without_results_fails_with_one_error_and_writes_nothing(tmp_path, capsys):
    assert report.run(paper_args(tmp_path)) == 1
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and "mrc-testbed report: no results folder (with summary.json)" in said.err
    assert said.out == "" and not (tmp_path / "paper.md").exists()


def path_loss_case(variant: str, seed: int, first_rtts: list[float], rtt: float = 9e-6, kept: float = 0.75) -> dict:
    """A path-loss case of one seed whose connections retired their first EV `first_rtts` base RTTs
    after the fault (none: nothing retired)."""
    by_connection = {f"h{i}->h{i + 2}": x * rtt for i, x in enumerate(first_rtts)}
    first = ({"min": min(by_connection.values()), "max": max(by_connection.values()), "by_connection": by_connection}
             if by_connection else None)
    return {"variant": variant, "transport": "MRC", "mode": "mrc", "completed": True, "completion_time_s": 700e-6,
            "base_rtt_s": rtt, "seed": seed, "repetition": seed - 1,
            "ev_retirements": {"evs": 512, "kept_share": kept, "first_retired_after_failure_s": first}}


def test_a_repeated_path_loss_gives_every_connections_first_retirement_over_all_seeds():
    from experiments.paper import path_loss_figures
    lossy = [[3.0, 5.0, 6.0, 4.0], [2.8, 7.6, 5.5, 5.4], [5.0, 3.7, 5.2, 12.4]]
    runs = [path_loss_case("20% loss on one link", seed, x) for seed, x in enumerate(lossy, start=1)]
    runs += [path_loss_case("random loss", seed, [], kept=1.0) for seed in (1, 2, 3)]
    # the representative (median) run alone would say 2.8-7.6 and nothing past 10
    summary = {"repeat": 3, "seeds": [1, 2, 3], "cases": [runs[1], runs[3]], "runs": runs}
    link, random = path_loss_figures(summary)
    assert ("12 connections retired EVs over 3 seeds (1-3), each its first 2.8-12.4 base RTTs after the fault, "
            "median 5.1; 1 of them past issue 29's 10: 12.4 (seed 3)") in link
    assert "finished in 700 us (in each of 3 runs)" in link
    assert "100% (in each of 3 runs) of its 512 EVs never retired" in random and "retired EVs" not in random
    # one run: its own connections, no seeds named
    (one,) = path_loss_figures({"cases": [path_loss_case("20% loss on one link", 1, [3.0, 11.0])]})
    assert one.endswith("; 2 connections retired EVs, each its first 3.0-11.0 base RTTs after the fault, "
                        "median 7.0; 1 of them past issue 29's 10: 11.0")


def test_a_summary_without_each_connections_retirement_gives_the_range_and_says_what_it_cannot():
    from experiments.paper import path_loss_figures
    runs = [path_loss_case("20% loss on one link", seed, x) for seed, x in ((1, [3.0, 6.0]), (2, [4.0, 12.4]))]
    for run in runs:                                    # as written before `by_connection`
        del run["ev_retirements"]["first_retired_after_failure_s"]["by_connection"]
    (line,) = path_loss_figures({"repeat": 2, "seeds": [1, 2], "cases": [runs[0]], "runs": runs})
    assert "each run its first 3.0-12.4 base RTTs after the fault" in line
    assert "no median, no count past issue 29's 10" in line and "median 4" not in line


def test_the_report_follows_a_link_to_a_run_folder_and_reads_a_folder_reached_twice_once(tmp_path):
    import json

    from experiments.report import find_runs
    run = tmp_path / "elsewhere" / "gray-1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"scenario": "gray", "created": "now", "cases": []}))
    results = tmp_path / "results"
    results.mkdir()
    (results / "gray-1").symlink_to(run, target_is_directory=True)
    (results / "loop").symlink_to(results, target_is_directory=True)      # a link back up the tree
    assert [folder for folder, _ in find_runs(results)] == [results / "gray-1"]
    (results / "runs").mkdir()
    (run.parent / "gray-1").rename(results / "runs" / "gray-1")          # the run inside, a link beside it
    (results / "gray-1").unlink()
    (results / "a-latest").symlink_to(results / "runs" / "gray-1", target_is_directory=True)
    assert [folder for folder, _ in find_runs(results)] == [results / "runs" / "gray-1"]
