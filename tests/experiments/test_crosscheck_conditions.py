"""What a crosscheck's outputs say beside its figures: the conditions of its wall times (date,
load, netsim's build, htsim_uec's path and commit), which ideal the CDF divides by, and each of
the backend's notes once however many cases and seeds it is of."""
from __future__ import annotations

import json
import os
import shutil

import speedups
from experiments import conditions as experiments_conditions, crosscheck, results
from tests.experiments import test_crosscheck
from tests.experiments.test_crosscheck import DATACENTER, STANDIN, crosscheck as run_crosscheck

standin = test_crosscheck.standin           # the fixture: htsim_uec is the stand-in


def test_the_wall_times_say_when_on_what_load_with_which_build_and_which_htsim_uec(standin, tmp_path, capsys):
    from cli.main import main
    out = tmp_path / "r"
    assert main(["crosscheck", str(DATACENTER), "--quick", "--variant", "incast", "--seeds", "1", "2",
                 "--balancer", "mixed", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    conditions = json.loads((out / "summary.json").read_text())["conditions"]
    assert conditions["build"] == str(speedups.build_in_use()) and conditions["cores"] == os.cpu_count()
    assert conditions["htsim_uec"] == standin and conditions["htsim_uec_commit"] is None
    assert conditions["load_1min_start"] >= 0 and conditions["date"].endswith("UTC")
    line = crosscheck.conditions_line({"conditions": conditions})
    assert line.startswith(f"Wall times measured {conditions['date']} on {os.cpu_count()} cores, 1-min load ")
    assert f"build: {speedups.build_in_use()}, netsim's only" in line
    assert f"htsim_uec: {standin}, uet-htsim commit unknown (no htsim_standin.py.commit beside it" in line
    assert line in said.splitlines()                                     # the console
    md = (out / "summary.md").read_text().splitlines()                  # summary.md: the conditions once,
    assert f"Wall times: {crosscheck.htsim_line({'conditions': conditions})}" in md      # under the table
    assert sum(conditions.get("date") in row for row in md) == 1 and \
        sum(f"on {experiments_conditions.text(conditions)}" in row for row in md) == 1   # under the title
    assert crosscheck.conditions_line({}) == ""                          # results written before them


def test_the_htsim_commit_is_read_from_beside_the_binary_or_the_file_it_links_to(tmp_path):
    built = tmp_path / "bin" / "htsim_uec"
    built.parent.mkdir()
    shutil.copy(STANDIN, built)
    link = tmp_path / "htsim_uec"
    link.symlink_to(built)
    assert crosscheck.htsim_commit(str(link)) is None
    (tmp_path / "bin" / "htsim_uec.commit").write_text("40ccb0526bb6297eeb22ab33f9934fb35278dbaf\n")
    assert crosscheck.htsim_commit(str(link)) == crosscheck.htsim_commit(str(built)) == \
        "40ccb0526bb6297eeb22ab33f9934fb35278dbaf"
    conditions = crosscheck.run_conditions({"date": "d", "cores": 2, "load_1min_start": 1.0, "load_1min_end": 1.5,
                                            "build": "pure Python (x)"}, str(link))
    assert crosscheck.conditions_line({"conditions": conditions}).endswith(
        f"htsim_uec: {link}, uet-htsim 40ccb0526bb6297eeb22ab33f9934fb35278dbaf.")


def test_the_cdf_axis_names_the_receivers_ideal_and_why_a_flow_can_end_below_1(standin, tmp_path, monkeypatch):
    _, _, rows, _ = run_crosscheck(tmp_path, path=DATACENTER, variants=("incast",))
    from experiments.plots import plt
    captured = []
    monkeypatch.setattr("experiments.plots.save_figure", lambda fig, path, title, fontsize: captured.append(fig))
    crosscheck.cdf_figure(rows, tmp_path / "a.png", "t")
    label = captured[0].axes[0].get_xlabel()
    plt.close(captured[0])
    assert label.startswith("flow completion (acked) / its receiver's ideal")
    assert "all bytes into that receiver at line rate + base RTT" in label and "can end below 1" in label


def test_each_note_is_said_once_however_many_seeds_it_is_of(standin, tmp_path):
    _, md, _, _ = run_crosscheck(tmp_path, path=DATACENTER, balancers=("mixed", "bitmap"), seeds=(1, 2),
                                 variants=("incast",))
    notes = md.split("Notes (what the backend said of each case):")[1].split("Definitions:")[0]
    for balancer in ("mixed", "bitmap"):
        said = [line for line in notes.splitlines() if f"htsim: load balancer {balancer};" in line]
        assert said == [f"- incast / htsim {balancer}: MRC: htsim: load balancer {balancer}; htsim_uec reports "
                        "completions only, so goodput, recovery and gap figures of this case are not measured"]


def test_note_lines_name_a_case_once_and_the_seeds_only_when_the_note_is_not_of_all():
    def case(variant, seed, *notes):
        return {"variant": variant, "transport": "MRC", "seed": seed, "notes": list(notes)}
    lines = results.note_lines([case("a", 1, "capped", "cut"), case("a", 2, "capped"), case("b", 1, "capped"),
                                case("b", 2, "capped", "cut", "cut")])
    assert lines == ["capped (2 cases: a / MRC; b / MRC)", "cut (2 cases: a / MRC (seed 1); b / MRC (seed 2))"]
    assert results.note_lines([case("a", 1, "x", "y")]) == ["a / MRC: x", "a / MRC: y"]     # one case: as it was
