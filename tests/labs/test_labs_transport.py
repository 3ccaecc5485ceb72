"""Labs 3 and 4 (the transport's extension points, checked on netsim): the solutions pass, the
untouched skeletons fail every check with its hint, and plausible wrong answers fail the check
meant to catch them."""
from __future__ import annotations

import textwrap

import pytest

from cli import lab as lab_cli
from labs import catalog, workspace
from labs.checking import Workspace, run_checks

SACK_FILE, MONITOR_FILE = "sack.py", "monitor.py"


def results_of(number: int, folder) -> dict:
    lab = catalog.get_lab(number)
    return {r.check: r for r in run_checks(lab.checks(), Workspace(folder))}


def wrong_answer(number: int, tmp_path, file: str, cls: str, override: str):
    """A work folder holding the lab's solution with `cls` replaced by a subclass defining `override`."""
    lab = catalog.get_lab(number)
    work = workspace.start(lab, tmp_path / "student")
    body = textwrap.indent(textwrap.dedent(override), "    ")
    text = (lab.solution / file).read_text() + f"\n\nclass Wrong({cls}):\n{body}\n\n{cls} = Wrong\n"
    (work / file).write_text(text)
    return work


def statuses(results: dict) -> dict:
    return {name: r.status for name, r in results.items()}


@pytest.mark.slow
@pytest.mark.parametrize("number", [3, 4])
def test_the_solution_passes_every_check(number):
    lab = catalog.get_lab(number)
    results = results_of(number, lab.solution)
    assert len(results) >= 4
    assert all(r.passed for r in results.values()), {n: r.detail for n, r in results.items() if not r.passed}


@pytest.mark.parametrize("number,file", [(3, SACK_FILE), (4, MONITOR_FILE)])
def test_the_untouched_skeleton_fails_every_check_with_its_hint(number, file, tmp_path):
    lab = catalog.get_lab(number)
    work = workspace.start(lab, tmp_path / "student")
    hints = {c.name: c.hint for c in lab.checks()}
    for name, result in results_of(number, work).items():
        assert result.status == "fail"
        assert "TODO" in result.detail and file in result.detail
        assert result.hint == hints[name] and result.hint


# --- lab 3: selective repeat --------------------------------------------------------------------
GO_BACK_N = """
    def lost(self, cum, base, bitmap, window, now):
        '''Every packet from the first hole on.'''
        if bitmap == 0:
            return []
        return list(range(cum, window.next_seq))
"""
EVERY_HOLE_AT_ONCE = """
    def lost(self, cum, base, bitmap, window, now):
        '''Every number below the highest SACKed one that the SACK does not cover.'''
        top = base + bitmap.bit_length()
        return [s for s in range(cum, top) if s < base or not bitmap >> (s - base) & 1]
"""
NOTHING = """
    def lost(self, cum, base, bitmap, window, now):
        '''MRC's default: leave every loss to the timers.'''
        return []
"""


ABOVE_THE_HOLE = """
    def lost(self, cum, base, bitmap, window, now):
        '''A hole is lost once 3 packets numbered above it arrived (not: sent after it).'''
        out = []
        for seq in range(max(cum, window.cum_acked), min(base + bitmap.bit_length(), window.next_seq)):
            if seq >= base and bitmap >> (seq - base) & 1:
                continue
            seg = window.segment(seq)
            above = sum(1 for s in range(seq + 1, base + bitmap.bit_length()) if s >= base and bitmap >> (s - base) & 1)
            if seg is not None and seg.in_flight and above >= 3:
                out.append(seq)
        return out
"""
# a correct answer written otherwise than the solution: the third latest send time among the arrivals
RACK_LIKE = """
class SelectiveRepeat:
    def __init__(self, config):
        self.needed = 3

    def lost(self, cum, base, bitmap, window, now):
        arrived = [window.segment(base + i) for i in range(bitmap.bit_length()) if bitmap >> i & 1]
        times = sorted((seg.sent_at for seg in arrived if seg is not None), reverse=True)
        if len(times) < self.needed:
            return []
        cutoff = times[self.needed - 1]
        holes = []
        for seq in range(window.cum_acked, window.next_seq):
            if base <= seq < base + 64 and bitmap >> (seq - base) & 1:
                continue
            seg = window.segment(seq)
            if seg is not None and seg.in_flight and not seg.acked and seg.sent_at < cutoff:
                holes.append(seq)
        return holes
"""


@pytest.mark.slow
def test_lab3_resending_everything_after_the_first_hole_is_caught_as_spurious(tmp_path):
    got = results_of(3, wrong_answer(3, tmp_path, SACK_FILE, "SelectiveRepeat", GO_BACK_N))
    assert got["exactly once at 0, 1 and 20 % loss"].passed        # correct, only wasteful
    spurious = got["no spurious retransmissions"]
    assert spurious.status == "fail" and "a second time" in spurious.detail and "reorders" in spurious.hint
    assert got["goodput beats go-back-N at 1 % loss"].status == "fail"


@pytest.mark.slow
def test_lab3_a_hole_is_not_yet_a_loss_under_spraying(tmp_path):
    got = results_of(3, wrong_answer(3, tmp_path, SACK_FILE, "SelectiveRepeat", EVERY_HOLE_AT_ONCE))
    assert got["exactly once at 0, 1 and 20 % loss"].passed
    assert got["no spurious retransmissions"].status == "fail"
    assert "reached the receiver a second time" in got["no spurious retransmissions"].detail


@pytest.mark.slow
def test_lab3_counting_arrivals_above_the_hole_resends_it_again_and_again(tmp_path):
    got = results_of(3, wrong_answer(3, tmp_path, SACK_FILE, "SelectiveRepeat", ABOVE_THE_HOLE))
    caught = got["no spurious retransmissions"]
    assert caught.status == "fail" and "reached the receiver a second time" in caught.detail


def test_lab3_leaving_losses_to_the_timers_is_caught(tmp_path):
    got = results_of(3, wrong_answer(3, tmp_path, SACK_FILE, "SelectiveRepeat", NOTHING))
    assert got["exactly once at 0, 1 and 20 % loss"].passed and got["no spurious retransmissions"].passed
    caught = got["losses repaired by SACK, not by timers"]     # what catches it, whatever the goodput
    assert caught.status == "fail" and "declared 0 packets lost" in caught.detail and "timer" in caught.detail


def test_lab3_a_correct_answer_written_otherwise_passes(tmp_path):
    lab = catalog.get_lab(3)
    work = workspace.start(lab, tmp_path / "student")
    (work / SACK_FILE).write_text(RACK_LIKE)
    got = results_of(3, work)
    assert all(r.passed for r in got.values()), {n: r.detail for n, r in got.items() if not r.passed}


# --- lab 4: a dead path ------------------------------------------------------------------------------
RETIRE_ON_ECN = """
    def on_ecn(self, evset, ev, now):
        '''An ECN echo retires the EV.'''
        evset.mark_bad(ev, now, "ecn")
"""
RETIRE_ON_EVERY_TIMEOUT = """
    def on_timeout(self, evset, timeout, now):
        '''Every timeout retires its EV, evidence or not.'''
        return evset.mark_bad(timeout.ev, now, "timeout")
"""
RETIRE_ONE_BY_ONE = """
    def on_timeout(self, evset, timeout, now):
        '''Sets the state by hand: no fate sharing, no backup EV.'''
        from host_agent.transport.evset import EvState
        if timeout.delivered_sent_at > timeout.sent_at + 0.25 * timeout.srtt and timeout.sent_at >= timeout.first_rtt_at:
            evset._set(timeout.ev, EvState.ASSUMED_BAD, "timeout", now)
            return [timeout.ev]
        return []
"""
NEVER_BACK = """
    def on_probe(self, evset, ev, answered, now):
        '''Counts probe replies but never reinstates.'''
        evset.note_probe(ev, answered)
"""
NO_KEEPALIVE = """
    def on_keepalive_miss(self, evset, ev, misses, now):
        '''Left empty: keepalives never retire a path.'''
        return False
"""
NO_SPURIOUS = """
    def on_spurious(self, evset, ev, now):
        '''Left empty: a wrong timeout is never undone.'''
"""
FIRST_REPLY = """
    def on_probe(self, evset, ev, answered, now):
        '''One answered probe brings the EV back.'''
        evset.note_probe(ev, answered)
        if answered:
            evset.reinstate(ev, "probe", now)
"""
FORGOTTEN_BACKUP = """
    def on_spurious(self, evset, ev, now):
        '''Reinstates whatever the timeout retired, even a backup the set has forgotten.'''
        evset.reinstate(ev, "spurious_timeout", now)
"""
FAILURE_CHECKS = ("the dead path's EVs retired within 3 RTOs", "backup EVs from the same plane",
                  "nothing sent on the dead path afterwards", "reinstated by probes after the repair")


@pytest.mark.slow
@pytest.mark.parametrize("override, says", [
    (NO_KEEPALIVE, "on_keepalive_miss"), (NO_SPURIOUS, "on_spurious: a timeout retired an EV"),
    (FIRST_REPLY, "on_probe: the EV came back after the probe replies [True]"),
    (FORGOTTEN_BACKUP, "on_spurious: for a backup EV the set had already forgotten")],
    ids=["keepalive", "spurious", "first-reply", "forgotten-backup"])
def test_lab4_every_hook_is_graded(override, says, tmp_path):
    got = results_of(4, wrong_answer(4, tmp_path, MONITOR_FILE, "DeadPathMonitor", override))
    hooks = got["every hook, called directly"]
    assert hooks.status == "fail" and says in hooks.detail, hooks.detail
    if override is NO_KEEPALIVE:                   # and the run sees it: h2 never retires its dead path
        end = got["the receiving end retires and reinstates too"]
        assert end.status == "fail" and "on_keepalive_miss" in end.detail, end.detail


@pytest.mark.slow
def test_lab4_retiring_an_ev_on_an_ecn_echo_is_caught(tmp_path):
    got = results_of(4, wrong_answer(4, tmp_path, MONITOR_FILE, "DeadPathMonitor", RETIRE_ON_ECN))
    assert all(got[name].passed for name in FAILURE_CHECKS)
    caught = got["congestion retires no path"]
    assert caught.status == "fail" and "ecn" in caught.detail and "busy, not broken" in caught.hint


@pytest.mark.slow
def test_lab4_a_timeout_without_evidence_is_caught(tmp_path):
    got = results_of(4, wrong_answer(4, tmp_path, MONITOR_FILE, "DeadPathMonitor", RETIRE_ON_EVERY_TIMEOUT))
    assert got["a paused receiver retires no path"].status == "fail"
    assert got["congestion retires no path"].passed


@pytest.mark.slow
def test_lab4_retiring_without_the_ev_sets_mechanism_is_caught(tmp_path):
    got = statuses(results_of(4, wrong_answer(4, tmp_path, MONITOR_FILE, "DeadPathMonitor", RETIRE_ONE_BY_ONE)))
    assert got["the dead path's EVs retired within 3 RTOs"] == "fail"
    assert got["backup EVs from the same plane"] == "fail"


@pytest.mark.slow
def test_lab4_never_reinstating_is_caught(tmp_path):
    got = statuses(results_of(4, wrong_answer(4, tmp_path, MONITOR_FILE, "DeadPathMonitor", NEVER_BACK)))
    assert got["reinstated by probes after the repair"] == "fail"
    assert got["the dead path's EVs retired within 3 RTOs"] == "pass"


@pytest.mark.slow
def test_a_class_of_lab3_is_graded_in_one_csv(tmp_path, capsys):
    lab = catalog.get_lab(3)
    done = workspace.start(lab, tmp_path / "done")
    (done / SACK_FILE).write_text(RACK_LIKE)
    untouched = workspace.start(lab, tmp_path / "untouched")
    args = lab_cli.argparse.Namespace(number=3, dirs=[done, untouched], solution=False, csv=tmp_path / "class.csv",
                                      gradescope=None, instructor=False, timeout=None, memory_mb=None)
    assert lab_cli.check_lab(lab, args) == 1
    rows = (tmp_path / "class.csv").read_text().splitlines()
    assert rows[1].endswith(",4,4") and rows[2].endswith(",0,4")
    assert "hint:" in capsys.readouterr().out
