"""Labs 1, 2, 5 and 6: each solution passes its checker, and the untouched skeleton fails every check
with the check's hint (so every check can fail). Lab 2 needs p4c and BMv2: without them its checks
skip, saying what is missing; p4c's verdict is tested with stand-ins for p4c."""
import difflib
import os
import shutil
import stat
import textwrap
from pathlib import Path

import pytest

from labs import catalog, workspace
from labs.checking import Workspace, run_checks

REPO = Path(__file__).resolve().parents[2]
NETSIM_LABS = (1, 5, 6)


@pytest.fixture(scope="module")
def checks_of():
    """Each lab's checks, loaded once per module (the checks keep their netsim runs)."""
    loaded = {}

    def get(number):
        if number not in loaded:
            loaded[number] = catalog.get_lab(number).checks()
        return loaded[number]
    return get


def test_the_labs_are_listed_with_what_they_need():
    labs = {lab.number: lab for lab in catalog.all_labs()}
    assert {1, 2, 5, 6} <= set(labs)
    assert labs[2].needs == ("root", "bmv2", "p4c")
    assert all(labs[n].needs == () for n in NETSIM_LABS)          # netsim: a classroom without VMs
    for n in (1, 2, 5, 6):
        assert (labs[n].folder / "README.md").is_file() and 45 <= labs[n].minutes <= 90


@pytest.mark.slow
@pytest.mark.parametrize("number", NETSIM_LABS)
def test_the_solution_passes_every_check(number, checks_of):
    lab = catalog.get_lab(number)
    results = run_checks(checks_of(number), Workspace(lab.solution))
    assert [(r.check, r.status) for r in results] == [(r.check, "pass") for r in results], \
        [r.detail for r in results if not r.passed]


@pytest.mark.parametrize("number", NETSIM_LABS)
def test_the_untouched_skeleton_fails_every_check_with_its_hint(number, checks_of, tmp_path):
    lab = catalog.get_lab(number)
    checks = checks_of(number)
    work = workspace.start(lab, tmp_path / "student")
    results = run_checks(checks, Workspace(work))
    assert [r.status for r in results] == ["fail"] * len(checks), [(r.check, r.detail) for r in results]
    for check, result in zip(checks, results):
        assert result.hint == check.hint and result.hint and result.detail


@pytest.mark.slow
def test_lab1_figures_show_spraying_balances_the_links(checks_of):
    [imbalance] = [c for c in checks_of(1) if c.name == "link imbalance"]
    detail = imbalance.run(Workspace(catalog.get_lab(1).solution))
    spraying = float(detail.split("MRC spraying: ")[1].split(";")[0])
    ecmp = float(detail.split("RoCE ECMP: ")[1].split(";")[0])
    assert spraying < 1.2 < 2.0 < ecmp


# --- lab 2: P4 ----------------------------------------------------------------------------------
LAB2 = catalog.get_lab(2)


def test_lab2_solution_is_the_switch_program():
    assert (LAB2.solution / "mrc.p4").read_bytes() == (REPO / "p4" / "mrc.p4").read_bytes(), \
        "labs/02-trimming-in-p4/solution/mrc.p4 drifted from p4/mrc.p4: copy it again"


def test_lab2_skeleton_differs_only_where_the_trim_logic_was_cut():
    skeleton = (LAB2.skeleton / "mrc.p4").read_text().splitlines()
    solution = (LAB2.solution / "mrc.p4").read_text().splitlines()
    hunks = [op for op in difflib.SequenceMatcher(a=solution, b=skeleton, autojunk=False).get_opcodes()
             if op[0] != "equal"]
    assert len(hunks) == 3
    cut = [solution[i1:i2] for _, i1, i2, _, _ in hunks]
    todo = [skeleton[j1:j2] for _, _, _, j1, j2 in hunks]
    assert all(any("TODO (lab 2)" in line for line in lines) for lines in todo)
    removed = "\n".join("\n".join(lines) for lines in cut)
    for piece in ("truncate(DATA_HEADERS_LEN)", "TRIMMED_UDP_LEN", "DSCP_TRIMMED_LASTHOP", "PRIORITY_HIGH",
                  "MRCH_FLAG_TRIMMED", "meta.trim_threshold", "DSCP_TRIMMABLE_RETX"):
        assert piece in removed


def _fake_p4c(folder: Path, script: str) -> Path:
    folder.mkdir()
    program = folder / "p4c"
    program.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return folder


def test_lab2_without_p4c_every_check_skips_naming_what_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    results = run_checks(LAB2.checks(), Workspace(LAB2.solution))
    assert [r.status for r in results] == ["skip", "skip"]
    assert all("p4c" in r.detail and "VM" in r.detail for r in results)


def test_lab2_a_p4c_error_fails_the_compile_check_with_its_message(monkeypatch, tmp_path):
    fake = _fake_p4c(tmp_path / "bin", """\
        echo "mrc.p4(318): error: truncate: expected 1 argument" >&2
        exit 1
    """)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    work = workspace.start(LAB2, tmp_path / "student")
    compiles = LAB2.checks()[0]
    [result] = run_checks([compiles], Workspace(work))
    assert result.status == "fail" and "mrc.p4(318): error" in result.detail and result.hint == compiles.hint


def test_lab2_compiles_into_a_temporary_folder_never_p4_build(monkeypatch, tmp_path):
    seen = tmp_path / "seen"
    fake = _fake_p4c(tmp_path / "bin", f"""\
        while [ $# -gt 0 ]; do
          case "$1" in --p4runtime-files) info="$2"; shift 2;; -o) out="$2"; shift 2;;
                       --target|--arch|--std) shift 2;; *) src="$1"; shift;; esac
        done
        echo "$out $src" > {seen}
        echo '{{}}' > "$out/mrc.json"; echo '' > "$info"
    """)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    before = {p: p.stat().st_mtime_ns for p in (REPO / "p4" / "build").iterdir()}
    [result] = run_checks([LAB2.checks()[0]], Workspace(LAB2.solution))
    assert result.passed, result.detail
    out, src = seen.read_text().split()
    assert src == str(LAB2.solution / "mrc.p4") and not Path(out).exists()     # removed afterwards
    assert not Path(out).resolve().is_relative_to(REPO)
    assert {p: p.stat().st_mtime_ns for p in (REPO / "p4" / "build").iterdir()} == before


@pytest.mark.integration
@pytest.mark.slow
def test_lab2_checker_runs_the_trimming_cases_on_bmv2(monkeypatch, tmp_path):
    """The BMv2 half of the checker, with p4c stood in for by the committed build of p4/mrc.p4."""
    if os.geteuid() != 0 or not shutil.which("simple_switch_grpc"):
        pytest.skip("needs root and BMv2 (simple_switch_grpc) on PATH")
    build = REPO / "p4" / "build"
    fake = _fake_p4c(tmp_path / "bin", f"""\
        while [ $# -gt 0 ]; do
          case "$1" in --p4runtime-files) info="$2"; shift 2;; -o) out="$2"; shift 2;;
                       --target|--arch|--std) shift 2;; *) shift;; esac
        done
        cp {build / 'mrc.json'} "$out/mrc.json" && cp {build / 'mrc.p4info.txtpb'} "$info"
    """)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    results = run_checks(LAB2.checks(), Workspace(LAB2.solution))
    assert [r.status for r in results] == ["pass", "pass"], [r.detail for r in results]
    assert f"all {_lab2_case_count()} trimming conformance cases pass" in results[1].detail


def _lab2_case_count() -> int:
    """How many cases lab 2's checker runs: trim.yaml's and every case named for trimming."""
    from conformance.case import CASES_DIR, load_cases
    return sum(1 for c in load_cases(CASES_DIR) if c.source == "trim.yaml" or "trim" in c.name)


@pytest.mark.slow
def test_lab2_with_the_real_p4c_the_solution_passes_and_the_skeleton_fails_on_bmv2(tmp_path):
    """Where p4c and BMv2 are installed: the whole checker, compiler included."""
    if os.geteuid() != 0 or not shutil.which("simple_switch_grpc") or not shutil.which("p4c"):
        pytest.skip("needs root, p4c and BMv2 (simple_switch_grpc) on PATH")
    solution = run_checks(LAB2.checks(), Workspace(LAB2.solution))
    assert [r.status for r in solution] == ["pass", "pass"], [r.detail for r in solution]
    skeleton = run_checks(LAB2.checks(), Workspace(LAB2.skeleton))
    assert [r.status for r in skeleton] == ["pass", "fail"], [r.detail for r in skeleton]


# --- plausible wrong answers fail the check that should catch them, naming the mistake ----------------
WRONG_ANSWERS = [
    # (lab, file, text of the solution, wrong text, the check that must fail, what its detail says)
    (1, "paths.py", "values = list(tx_bytes.values())", "values = [v for v in tx_bytes.values() if v]",
     "link imbalance", "you say 1.0, too low"),                  # idle links left out of the mean
    (1, "paths.py", "return max(values) / mean", "return max(values) / (sum(values) / (len(values) + 1))",
     "link imbalance", "too high"),                               # one link too many in the mean
    (1, "paths.py", "usids = [topo.switch(name).usid for name in switches] + [topo.host(dst).usid]",
     "usids = [topo.switch(name).usid for name in switches]", "uSID paths of a host pair",
     "differs from the testbed's from its 16-bit group"),           # no host uSID
    (1, "paths.py", "value = (LOCATOR_PREFIX << 16) | nic.plane", "value = LOCATOR_PREFIX << 16",
     "uSID paths of a host pair", "from its 16-bit group 2 on"),     # the plane left out of the locator
    (1, "paths.py", "rest = (rest << USID_BITS) & ((1 << 96) - 1)", "rest = (rest << 8) & ((1 << 96) - 1)",
     "the uSID shift, hop by hop", "after switch 1 (s1) you say the packet carries"),   # shifts 8 bits
    (1, "paths.py", "while 0 < (rest >> 80) < 0x1000:", "while 0 < (rest >> 64) & 0xFFFF < 0x1000:",
     "the uSID shift, hop by hop", "switch(es) and the packet left"),    # stops one switch early
    (5, "incast.py", '"incast_s": None if None in finishes else max(finishes) - record.start',
     '"incast_s": None if None in finishes else min(finishes) - record.start',
     "the incast's numbers from a run", "your incast_s is"),      # the fastest sender, not the slowest
    (5, "incast.py", '"incast_s": None if None in finishes else max(finishes) - record.start',
     '"incast_s": max((f for f in finishes if f is not None), default=0.0) - record.start',
     "the incast's numbers from a run", "an incast flow never finished in this run"),    # unfinished flows
    (5, "incast.py", '"victim_bps": victim.received_bytes * 8 / (end - record.start)',
     '"victim_bps": victim.received_bytes * 8 / (record.end - record.start)',
     "the incast's numbers from a run", "your victim_bps is"),    # the whole run, not the victim's own time
    (5, "incast.py", '"dropped": record.switch_stats.get("queue_full_drops", 0)',
     '"dropped": record.switch_stats.get("fault_drops", 0)',
     "the incast's numbers from a run", "your dropped is 0 packets, lower than the run's"),   # wrong counter
    (5, "incast.py", '"drop-tail makes MRC retire EVs": True', '"drop-tail makes MRC retire EVs": False',
     "predictions: trimming against drop-tail", "your prediction False does not hold"),
    (5, "incast.py", '"slowest incast": "RoCE (drop-tail)"', '"slowest incast": "MRC drop-tail"',
     "predictions: trimming against drop-tail", "your prediction 'MRC drop-tail' does not hold"),
    (5, "incast.py", "THRESHOLDS = [2, 8, 16]", "THRESHOLDS = [2, 8, 12]",
     "the trim threshold", "your prediction True does not hold for your thresholds [2, 8, 12]"),
    (6, "lies.py", "    return on_every_bad - healthy", "    return on_every_bad",
     "find the failed switch from the EVs", "on a path whose EVs were never retired"),   # the leaves too
    (6, "lies.py", '    retired = [e for e in ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]',
     '    retired = [e for e in ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"'
     ' and e["cause"] == "timeout"]',
     "find the failed switch from the EVs", "you suspect"),        # only the data senders' retirements
    (6, "lies.py", "        total[key] += end - start", "        pass",
     "a gray link's per-EV timeline", "less than it was"),          # EVs still retired at the end
    (6, "lies.py", "        key = (e[\"conn\"], e[\"ev\"])", "        key = e[\"ev\"]",
     "a gray link's per-EV timeline", "keys are (conn, ev) pairs"),     # EVs keyed without their connection
    (6, "lies.py", '"spine blackholes": {"MRC": True, "RoCE": False, "RoCE + reroute 1 s": False}',
     '"spine blackholes": {"MRC": True, "RoCE": False, "RoCE + reroute 1 s": True}',
     "which transports finish", "spine blackholes / RoCE + reroute 1 s: your prediction (finishes) does not hold"),
    (6, "lies.py", "    for slot in range(6):", "    for slot in range(1, 6):",
     "path addresses to switches", "switch 1 of the path is not"),   # reads the plane's half of the locator
]


@pytest.mark.slow
@pytest.mark.parametrize("number, name, right, wrong, check, says", WRONG_ANSWERS,
                         ids=[f"lab{w[0]}-{w[4]}-{i}" for i, w in enumerate(WRONG_ANSWERS)])
def test_a_plausible_wrong_answer_fails_its_check_naming_the_mistake(number, name, right, wrong, check, says,
                                                                     checks_of, tmp_path):
    lab = catalog.get_lab(number)
    work = workspace.start(lab, tmp_path / "student")
    text = (lab.solution / name).read_text()
    assert text.count(right) == 1, right
    (work / name).write_text(text.replace(right, wrong))
    [target] = [c for c in checks_of(number) if c.name == check]
    [result] = run_checks([target], Workspace(work))
    assert result.status == "fail" and result.hint == target.hint, result.detail
    assert says in result.detail, result.detail
    assert result.expected and result.expected not in result.detail     # the answer is for instructors only


def test_a_student_who_spoils_the_shared_runs_does_not_change_the_next_ones_result(checks_of, tmp_path):
    """A class is checked with one set of checks, whose netsim runs are kept: students get copies."""
    lab = catalog.get_lab(6)
    work = workspace.start(lab, tmp_path / "student")
    text = (lab.solution / "lies.py").read_text()
    spoil = '    retired = [e for e in ev_events'
    assert text.count(spoil) == 1
    (work / "lies.py").write_text(text.replace(spoil, '    ev_events.clear()\n' + spoil))
    checks = [c for c in checks_of(6) if c.name in ("a gray link's per-EV timeline",
                                                    "find the failed switch from the EVs")]
    assert [r.status for r in run_checks(checks, Workspace(work))] == ["fail", "pass"]
    assert [r.status for r in run_checks(checks, Workspace(lab.solution))] == ["pass", "pass"]
