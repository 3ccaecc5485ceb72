"""Graded work must be the student's own: the reference implementations (the project's own policy,
the library function a lab asks to rewrite, the lab's solution) fail the check, saying so, whether
the student's class is one, derives from one or calls one; the solution cannot be read from a
student's run; transport settings the checker fixes stay fixed; hard-coded answers fail."""
from __future__ import annotations

import textwrap

import pytest

from cli import lab as lab_cli
from labs import catalog, isolation, workspace
from labs.checking import Workspace, run_checks
from labs.isolation import Limits


def work_with(number: int, tmp_path, file: str, text: str):
    lab = catalog.get_lab(number)
    work = workspace.start(lab, tmp_path / "student")
    (work / file).write_text(textwrap.dedent(text))
    return lab, work


def in_process(lab, work, names=None) -> dict:
    checks = [c for c in lab.checks() if names is None or c.name in names]
    return {r.check: r for r in run_checks(checks, Workspace(work))}


# --- lab 4: the path monitor ----------------------------------------------------------------------
def test_lab4_the_projects_own_monitor_under_the_students_name_fails_every_check(tmp_path):
    lab, work = work_with(4, tmp_path, "monitor.py",
                          "from host_agent.transport.policies import MrcPathMonitor as DeadPathMonitor\n")
    results = in_process(lab, work)
    assert len(results) == 8 and all(r.status == "fail" for r in results.values())
    assert all("is the project's own host_agent.transport.policies.MrcPathMonitor" in r.detail
               for r in results.values())


def test_lab4_a_subclass_of_the_reference_fails(tmp_path):
    lab, work = work_with(4, tmp_path, "monitor.py", """
        from host_agent.transport.policies import MrcPathMonitor

        class DeadPathMonitor(MrcPathMonitor):
            '''Mine, honest.'''
    """)
    [result] = in_process(lab, work, {"the dead path's EVs retired within 3 RTOs"}).values()
    assert result.status == "fail" and "derives from the project's own" in result.detail


def test_lab4_a_class_that_delegates_to_the_reference_fails_naming_the_call(tmp_path):
    lab, work = work_with(4, tmp_path, "monitor.py", """
        from host_agent.transport import policies

        class DeadPathMonitor:
            def __init__(self, config):
                self.inner = policies.MrcPathMonitor(config)

            def __getattr__(self, name):
                return getattr(self.inner, name)
    """)
    results = in_process(lab, work, {"the dead path's EVs retired within 3 RTOs", "every hook, called directly"})
    for result in results.values():
        assert result.status == "fail"
        assert "calls the project's reference implementation (host_agent.transport.policies.MrcPathMonitor." \
            in result.detail, result.detail


def test_lab4_methods_copied_from_the_reference_fail(tmp_path):
    lab, work = work_with(4, tmp_path, "monitor.py", """
        from host_agent.transport.policies import MrcPathMonitor

        DeadPathMonitor = type("DeadPathMonitor", (), dict(vars(MrcPathMonitor)))
    """)
    [result] = in_process(lab, work, {"every hook, called directly"}).values()
    assert result.status == "fail" and "uses code of the project's reference implementation" in result.detail


# --- lab 3: the SACK processor ------------------------------------------------------------------
def test_lab3_switching_mrcs_own_loss_detection_back_on_changes_nothing(tmp_path):
    """The issue's trick: turn the sender's SACK loss detection on and declare nothing."""
    lab, work = work_with(3, tmp_path, "sack.py", """
        class SelectiveRepeat:
            def __init__(self, config):
                config.sack_loss_detection = True

            def lost(self, cum, base, bitmap, window, now):
                window.cfg.sack_loss_detection = True      # the sender itself is not reachable either
                return []
    """)
    results = in_process(lab, work)
    caught = results["losses repaired by SACK, not by timers"]
    assert caught.status == "fail", caught.detail
    assert "declared" in results["exactly once at 0, 1 and 20 % loss"].detail or \
        "AttributeError" in results["exactly once at 0, 1 and 20 % loss"].detail


def test_lab3_changing_the_configuration_it_was_given_does_not_help(tmp_path):
    lab, work = work_with(3, tmp_path, "sack.py", """
        class SelectiveRepeat:
            def __init__(self, config):
                config.sack_loss_detection = True

            def lost(self, cum, base, bitmap, window, now):
                return []
    """)
    caught = in_process(lab, work, {"losses repaired by SACK, not by timers"})["losses repaired by SACK, not by timers"]
    assert caught.status == "fail" and "your SelectiveRepeat.lost declared 0 packets lost" in caught.detail


def test_lab3_mrcs_own_sack_processor_fails(tmp_path):
    lab, work = work_with(3, tmp_path, "sack.py",
                          "from host_agent.transport.policies import MrcSackProcessor as SelectiveRepeat\n")
    [result] = in_process(lab, work, {"no spurious retransmissions"}).values()
    assert result.status == "fail" and "MrcSackProcessor" in result.detail


# --- lab 1: library functions the lab asks to rewrite -------------------------------------------------
def test_lab1_wrapping_the_projects_path_function_fails(tmp_path):
    lab, work = work_with(1, tmp_path, "paths.py", """
        import topologies.paths

        def usid_paths(topo, src, dst):
            return [(p.switches, str(p.address)) for p in topologies.paths.host_paths(topo, src, dst)]
    """)
    [result] = in_process(lab, work, {"uSID paths of a host pair"}).values()
    assert result.status == "fail" and "topologies.paths.host_paths" in result.detail


def test_lab1_the_solution_is_not_readable_from_a_students_run(tmp_path):
    """Through the catalog (the issue's route) or the file itself: refused, in the graded process."""
    lab, work = work_with(1, tmp_path, "paths.py", """
        from labs import catalog
        _solution = catalog._load_module(catalog.get_lab(1).solution / "paths.py", "answer")
        usid_paths, after_each_switch, link_imbalance = (_solution.usid_paths, _solution.after_each_switch,
                                                         _solution.link_imbalance)
    """)
    results = isolation.grade(lab, work, Limits(60, 2048))
    assert [r.status for r in results] == ["fail"] * 3
    assert all("PermissionError" in r.detail and "solution" in r.detail for r in results), results[0].detail


# --- hard-coded answers ---------------------------------------------------------------------------
@pytest.mark.slow
def test_lab6_a_hard_coded_suspect_fails_on_the_runs_that_blame_other_switches(tmp_path):
    lab = catalog.get_lab(6)
    work = workspace.start(lab, tmp_path / "student")
    text = (lab.solution / "lies.py").read_text()
    (work / "lies.py").write_text(text + "\n\ndef suspects(topo, ev_events):\n    return {'s3'}\n")
    [result] = in_process(lab, work, {"find the failed switch from the EVs"}).values()
    assert result.status == "fail" and "you suspect ['s3'], on a path whose EVs were never retired" in result.detail
    assert result.expected in ("{'s4'}", "{'s5'}") and result.expected not in result.detail


# --- the class run, on lab 1 ------------------------------------------------------------------
CHEAT = """
import labs.checking


class Passing(labs.checking.CheckResult):
    @property
    def passed(self):
        return True


labs.checking.CheckResult = Passing


def usid_paths(topo, src, dst):
    return []


def after_each_switch(address):
    return []


def link_imbalance(tx_bytes):
    return 1.0
"""


@pytest.mark.slow
def test_lab1_a_class_with_a_cheat_grades_the_skeleton_after_it_as_alone(tmp_path):
    """`--dir cheat --dir skeleton1 --csv`: the cheat fails, the skeleton after it gets what it gets alone,
    and a correct answer written otherwise than the solution passes."""
    lab = catalog.get_lab(1)
    cheat = workspace.start(lab, tmp_path / "cheat")
    (cheat / "paths.py").write_text(CHEAT)
    skeleton = workspace.start(lab, tmp_path / "skeleton1")
    mine = workspace.start(lab, tmp_path / "mine")
    text = (lab.solution / "paths.py").read_text()
    (mine / "paths.py").write_text(text.replace("values = list(tx_bytes.values())\n    mean = sum(values) / len(values)\n"
                                                "    return max(values) / mean",
                                                "return max(tx_bytes.values()) * len(tx_bytes) / sum(tx_bytes.values())"))
    alone = {f: [r.status for r in isolation.grade(lab, f)] for f in (skeleton, mine)}
    assert alone[mine] == ["pass"] * 3 and alone[skeleton] == ["fail"] * 3
    args = lab_cli.argparse.Namespace(number=1, dirs=[cheat, skeleton, mine], solution=False,
                                      csv=tmp_path / "class.csv", gradescope=None, instructor=False,
                                      timeout=None, memory_mb=None)
    assert lab_cli.check_lab(lab, args) == 1
    rows = [line.split(",") for line in (tmp_path / "class.csv").read_text().splitlines()[1:]]
    assert rows[0][2:] == ["fail", "fail", "fail", "0", "3"]
    assert rows[1][2:5] == alone[skeleton] and rows[2][2:5] == alone[mine]
