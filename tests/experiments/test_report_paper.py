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
