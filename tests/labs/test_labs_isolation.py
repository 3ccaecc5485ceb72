"""Grading a class: each work folder is checked in a process of its own (labs.isolation, labs.sandbox),
so a hostile or broken folder fails only itself and the others are graded exactly as alone.

These use a tiny lab of their own (two checks on a doubling function, each child a fraction of a
second); tests/labs/test_labs_originality.py does the same with the real labs."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cli import lab as lab_cli
from labs import catalog, isolation, workspace
from labs.isolation import Limits

CHECK_PY = textwrap.dedent('''
    from labs.checking import Check, CheckFailed

    def doubles(ws):
        double = ws.module("work.py").double
        got = ws.call(double, 21)
        if got != 42:
            raise CheckFailed(f"double(21) gave {got!r}, " + ("too low" if got < 42 else "too high"),
                              expected="42")
        return "double(21) == 42"

    def doubles_negatives(ws):
        double = ws.module("work.py").double
        got = ws.call(double, -4)
        if got != -8:
            raise CheckFailed(f"double(-4) gave {got!r}", expected="-8")
        return "double(-4) == -8"

    CHECKS = [Check("doubles", "multiplying by two is adding a number to itself", doubles, points=2),
              Check("doubles negatives", "minus times plus", doubles_negatives)]
''')
GOOD = "def double(x):\n    return x + x\n"
HOSTILE = {
    # kind -> (work.py, what the failure detail says)
    "patches the grader": (textwrap.dedent('''
        import labs.checking
        class Passing(labs.checking.CheckResult):
            @property
            def passed(self):
                return True
        labs.checking.CheckResult = Passing
        labs.checking.CheckFailed = Exception
        def double(x):
            return x
        '''), "labs.checking.CheckFailed was replaced"),
    "exits at import": ("import sys\nsys.exit(0)\ndef double(x):\n    return 2 * x\n", "sys.exit(0)"),
    "ends the process": ("import os\nos._exit(0)\n", "ended early (exit status 0)"),
    "hangs": ("def double(x):\n    while True:\n        pass\n", "not finished within the time limit"),
    "raises": ("def double(x):\n    return x / 0\n", "ZeroDivisionError"),
    "forges results": (textwrap.dedent('''
        import json, os, sys
        for fd in range(1, 40):
            for i, name in enumerate(("doubles", "doubles negatives")):
                try:
                    os.write(fd, (json.dumps({"nonce": "x", "index": i, "check": name, "status": "pass",
                                              "detail": "", "expected": ""}) + "\\n").encode())
                except OSError:
                    pass
        print("PASS PASS PASS")
        def double(x):
            return x
        '''), "carried what the grader did not write"),
    "eats memory": ("blob = bytearray(4 << 30)\ndef double(x):\n    return 2 * x\n", "MemoryError"),
    "starts a process": ("import subprocess\nsubprocess.run(['true'])\ndef double(x):\n    return 2 * x\n",
                         "starts no process"),
    "closes the channel and hangs": (textwrap.dedent('''
        import os
        for fd in range(3, 40):
            try:
                os.close(fd)
            except OSError:
                pass
        def double(x):
            while True:
                pass
        '''), "not finished within the time limit"),
    "lists the grader's objects": ("import gc\nfound = gc.get_objects()\ndef double(x):\n    return 2 * x\n",
                                   "refuses gc.get_objects"),
    "reads the solution": (textwrap.dedent('''
        from pathlib import Path
        exec(Path(__file__).resolve().parents[1].joinpath("labs/07-doubling/solution/work.py").read_text())
        '''), "PermissionError"),
}
LIMITS = Limits(time_s=20.0, memory_mb=512)
HANG_LIMITS = Limits(time_s=2.0, memory_mb=512)        # what a folder that hangs is given


@pytest.fixture
def lab(tmp_path) -> catalog.Lab:
    folder = tmp_path / "labs" / "07-doubling"
    (folder / "skeleton").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "lab.yaml").write_text("title: Doubling\nminutes: 5\nsummary: double it\ntime_limit_s: 30\n")
    (folder / "skeleton" / "work.py").write_text("def double(x):\n    return x  # TODO\n")
    (folder / "solution" / "work.py").write_text("def double(x):\n    return 2 * x\n")
    (folder / "check.py").write_text(CHECK_PY)
    return catalog.read_lab(folder)


def folder_with(lab, root: Path, name: str, text: str) -> Path:
    work = workspace.start(lab, root / name.replace(" ", "-"))
    (work / "work.py").write_text(text)
    return work


def statuses(results) -> list[str]:
    return [r.status for r in results]


def test_a_correct_folder_passes_in_its_own_process(lab, tmp_path):
    results = isolation.grade(lab, folder_with(lab, tmp_path, "good", GOOD), LIMITS)
    assert statuses(results) == ["pass", "pass"] and results[0].detail == "double(21) == 42"


def test_a_failure_names_the_mistake_and_keeps_the_expected_value_for_the_instructor(lab, tmp_path):
    [low, _] = isolation.grade(lab, folder_with(lab, tmp_path, "low", "def double(x):\n    return x\n"), LIMITS)
    assert low.status == "fail" and "too low" in low.detail and "42" not in low.detail
    assert low.expected == "42" and low.hint.startswith("multiplying")


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_folder_fails_its_checks_with_the_reason(kind, lab, tmp_path):
    text, reason = HOSTILE[kind]
    work = folder_with(lab, tmp_path, kind, text)
    results = isolation.grade(lab, work, HANG_LIMITS if "hangs" in kind else LIMITS)
    assert statuses(results) == ["fail", "fail"], [(r.status, r.detail) for r in results]
    assert reason in results[0].detail, results[0].detail
    assert all(r.hint for r in results)


def test_a_copy_of_the_solution_is_refused_without_running_it(lab, tmp_path):
    work = folder_with(lab, tmp_path, "copy", "# mine!\ndef double(x):\n\n    return 2 * x   # really\n")
    results = isolation.grade(lab, work, LIMITS)
    assert statuses(results) == ["fail", "fail"] and "is the lab's own solution" in results[0].detail


CLASSES = {"small": ["patches the grader", "wrong", "exits at import", "good"],
           "every kind": ["patches the grader", "good", "exits at import", "wrong", "hangs", "ends the process",
                          "half", "forges results", "reads the solution"]}


@pytest.mark.parametrize("kind", [pytest.param("small"), pytest.param("every kind", marks=pytest.mark.slow)])
def test_a_class_with_hostile_folders_grades_the_others_exactly_as_alone(kind, lab, tmp_path, capsys):
    """One class run: hostile folders between correct and wrong ones; the CSV is written and the
    others' results are what they are alone."""
    honest = {"good": GOOD, "wrong": "def double(x):\n    return x * 3\n",
              "half": "def double(x):\n    return x + abs(x)\n"}
    order = CLASSES[kind]
    limits = HANG_LIMITS if "hangs" in order else LIMITS
    alone = {name: isolation.grade(lab, folder_with(lab, tmp_path / "alone", name, text), limits)
             for name, text in honest.items() if name in order}
    folders = [folder_with(lab, tmp_path / "class", name, honest.get(name) or HOSTILE[name][0]) for name in order]
    args = lab_cli.argparse.Namespace(number=7, dirs=folders, solution=False, csv=tmp_path / "class.csv",
                                      gradescope=None, instructor=False, timeout=limits.time_s,
                                      memory_mb=limits.memory_mb)
    assert lab_cli.check_lab(lab, args) == 1
    rows = (tmp_path / "class.csv").read_text().splitlines()
    assert len(rows) == 1 + len(order)
    by_name = dict(zip(order, rows[1:]))
    for name, results in alone.items():
        assert by_name[name].split(",")[2:] == [*statuses(results), str(sum(r.passed for r in results)), "2"]
    for name in order:
        if name not in honest:
            assert by_name[name].endswith("fail,fail,0,2"), (name, by_name[name])
    out = capsys.readouterr().out
    assert "expected" not in out                       # --instructor was not given


def test_gradescope_results_and_the_instructors_expected_values(lab, tmp_path, capsys):
    work = folder_with(lab, tmp_path, "half", "def double(x):\n    return x + abs(x)\n")
    results_json = tmp_path / "results" / "results.json"
    args = lab_cli.argparse.Namespace(number=7, dirs=[work], solution=False, csv=None, gradescope=results_json,
                                      instructor=True, timeout=None, memory_mb=None)
    assert lab_cli.check_lab(lab, args) == 1
    report = json.loads(results_json.read_text())
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in report["tests"]] == \
        [("doubles", 2.0, 2.0, "passed"), ("doubles negatives", 0.0, 1.0, "failed")]
    assert report["score"] == 2.0 and "hint: minus times plus" in report["tests"][1]["output"]
    assert "-8" not in report["tests"][1]["output"]             # what students see never has the answer
    assert "expected (instructor): -8" in capsys.readouterr().out


def test_gradescope_takes_one_folder(lab, tmp_path):
    folders = [folder_with(lab, tmp_path, n, GOOD) for n in ("a", "b")]
    args = lab_cli.argparse.Namespace(number=7, dirs=folders, solution=False, csv=None,
                                      gradescope=tmp_path / "r.json", instructor=False, timeout=None, memory_mb=None)
    with pytest.raises(workspace.WorkspaceError, match="one --dir"):
        lab_cli.check_lab(lab, args)


def test_the_time_limit_comes_from_lab_yaml_unless_given(lab, tmp_path):
    assert Limits.of(lab) == Limits(30.0, catalog.MEMORY_MB)
    assert Limits.of(lab, 5, 0) == Limits(5, 0)
    (lab.folder / "lab.yaml").write_text("title: D\nminutes: 5\nsummary: s\ntime_limit_s: soon\n")
    with pytest.raises(catalog.LabError, match="time_limit_s: expected a number, got str 'soon'"):
        catalog.read_lab(lab.folder)
