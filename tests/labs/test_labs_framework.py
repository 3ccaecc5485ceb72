"""The labs' machinery: finding labs, starting a work folder, running checks, grading a class."""
from __future__ import annotations

import csv
import io
import os
import textwrap
from pathlib import Path

import pytest

from labs import catalog, grading, workspace
from labs.checking import Workspace, run_checks

CHECK_PY = textwrap.dedent('''
    from labs.checking import Check, CheckFailed

    def doubles(ws):
        double = ws.module("work.py").double
        if double(21) != 42:
            raise CheckFailed(f"double(21) gave {double(21)!r}, expected 42")
        return "double(21) == 42"

    CHECKS = [Check("doubles", "multiplying by two is adding a number to itself", doubles)]
''')


@pytest.fixture
def root(tmp_path) -> Path:
    lab = tmp_path / "labs" / "07-doubling"
    (lab / "skeleton").mkdir(parents=True)
    (lab / "solution").mkdir()
    (lab / "lab.yaml").write_text("title: Doubling\nminutes: 5\nneeds: [p4c]\nsummary: double it\n")
    (lab / "skeleton" / "work.py").write_text("def double(x):\n    return x  # TODO\n")
    (lab / "solution" / "work.py").write_text("def double(x):\n    return 2 * x\n")
    (lab / "check.py").write_text(CHECK_PY)
    return tmp_path / "labs"


def test_labs_are_found_by_folder_with_their_metadata(root):
    [lab] = catalog.all_labs(root)
    assert (lab.number, lab.slug, lab.title, lab.minutes, lab.needs) == (7, "doubling", "Doubling", 5, ("p4c",))
    with pytest.raises(catalog.LabError, match="no lab 3: the labs are 7"):
        catalog.get_lab(3, root)


def test_a_malformed_lab_file_is_named(root):
    (root / "07-doubling" / "lab.yaml").write_text("title: x\nminutes: 5\nneeds: [gpu]\nsummary: y\n")
    with pytest.raises(catalog.LabError, match=r"lab.yaml: needs\[0\]: 'gpu' is not one of 'root', 'bmv2', 'p4c'"):
        catalog.all_labs(root)


def test_the_skeleton_fails_with_the_hint_and_the_solution_passes(root, tmp_path):
    lab = catalog.get_lab(7, root)
    work = workspace.start(lab, tmp_path / "student")
    assert workspace.lab_number_of(work) == 7
    [failed] = run_checks(lab.checks(), Workspace(work))
    assert failed.status == "fail" and "gave 21" in failed.detail and "adding" in failed.hint
    [passed] = run_checks(lab.checks(), Workspace(lab.solution))
    assert passed.passed and passed.hint == ""
    with pytest.raises(workspace.WorkspaceError, match="not empty"):
        workspace.start(lab, work)                     # never overwrites a student's work


def test_a_students_exception_is_a_failure_naming_the_line(root, tmp_path):
    lab = catalog.get_lab(7, root)
    work = workspace.start(lab, tmp_path / "student")
    (work / "work.py").write_text("def double(x):\n    return x / 0\n")
    [result] = run_checks(lab.checks(), Workspace(work))
    assert result.status == "fail" and "ZeroDivisionError" in result.detail and "work.py:2" in result.detail
    (work / "work.py").write_text("def double(x) return\n")
    [result] = run_checks(lab.checks(), Workspace(work))
    assert result.status == "fail" and "does not import" in result.detail


def test_a_class_is_graded_in_one_csv(root, tmp_path):
    lab = catalog.get_lab(7, root)
    good, bad = workspace.start(lab, tmp_path / "good"), workspace.start(lab, tmp_path / "bad")
    (good / "work.py").write_text("def double(x):\n    return x + x\n")
    results = {f: run_checks(lab.checks(), Workspace(f)) for f in (good, bad)}
    rows = list(csv.reader(io.StringIO(grading.class_csv(7, results))))
    assert rows[0] == ["folder", "lab", "doubles", "passed", "checks"]
    assert rows[1][2:] == ["pass", "1", "1"] and rows[2][2:] == ["fail", "0", "1"]


def test_missing_programs_are_said_with_how_to_get_them(root, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    [lab] = catalog.all_labs(root)
    [missing] = lab.missing()
    assert missing.startswith("p4c (p4c not on PATH)") and "VM" in missing


def test_student_runs_are_made_again_when_the_content_changes_even_at_the_same_time_and_size(tmp_path):
    from labs.checking import StudentRuns
    work = tmp_path / "work"
    work.mkdir()
    student = work / "sack.py"
    student.write_text("X = 1\n")
    stamp = student.stat().st_mtime_ns
    runs = StudentRuns("sack.py")
    ws = Workspace(work)
    made = []
    assert runs.get(ws, ("case",), lambda: made.append(1) or "first") == "first"
    assert runs.get(ws, ("case",), lambda: made.append(1) or "again") == "first"     # same content: kept
    student.write_text("X = 2\n")                                                  # same size...
    os.utime(student, ns=(stamp, stamp))                                            # ...and same time
    assert runs.get(ws, ("case",), lambda: made.append(1) or "second") == "second"
    assert len(made) == 2


def test_student_runs_name_a_file_that_cannot_be_read(tmp_path):
    from labs.checking import CheckFailed, StudentRuns
    work = tmp_path / "work"
    (work / "sack.py").mkdir(parents=True)                                          # a folder in its place
    with pytest.raises(CheckFailed, match="sack.py: cannot be read"):
        StudentRuns("sack.py").get(Workspace(work), (), lambda: "never")
