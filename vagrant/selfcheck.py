#!/usr/bin/env python3
"""The VM's self-check: what is installed, the switch conformance cases and a quick failover
experiment on one target, summed up on one screen.

    sudo /opt/mrc-testbed/venv/bin/python /vagrant/vagrant/selfcheck.py

vagrant/provision.sh runs it last, as root. It runs two commands of the testbed from the
repository:

    mrc-testbed conformance --target bmv2
    mrc-testbed run experiments/failover.yaml --backend mininet --target bmv2 --quick --out DIR

and judges the failover by its summary.json: every MRC case finished, delivered bit-exact data
and is valid (its link was killed within the collective, near its planned share; a run whose
fault missed a case exits 3 and is judged by its summary). The RoCE baselines are shown, not
judged: without rerouting RoCE is not expected to finish; a case that did not finish reads "cut
at horizon" with the share it delivered when it was still delivering, "stuck" when it was not.
Exit status 0 when every check passed, 1 when one failed. A failed check is named, its
log is kept in the output folder, and what the failed command left running is removed with
`mrc-testbed clean`, so the VM stays usable. Standard library only.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path("/opt/mrc-testbed/selfcheck")
P4LANG_PACKAGES = ("p4lang-p4c", "p4lang-bmv2", "p4lang-pi")
FAILOVER_SCENARIO = "experiments/failover.yaml"
CONFORMANCE_STATUSES = ("PASS", "FAIL", "ERROR", "SKIP")
STOP_GRACE_S = 30.0
RESULT_FILE = "result.txt"
RUN_EXIT_INVALID = 3            # `mrc-testbed run`: done, but a case is invalid (named in its summary)


@dataclass
class SelfCheckLine:
    """One line of the result: a check's name, whether it passed (None: for information), what
    it found, and the lines that detail it."""
    name: str
    passed: Optional[bool]
    summary: str
    details: list[str] = field(default_factory=list)


@dataclass
class Settings:
    """What to check and where: the mrc-testbed program, the repository (the commands' working
    folder), the output folder, the switch target, the failover's backend, a time limit."""
    mrc_testbed: str
    repo: Path
    out: Path
    target: str
    backend: str
    timeout_s: float

    def conformance_command(self) -> list[str]:
        return [self.mrc_testbed, "conformance", "--target", self.target]

    def failover_command(self) -> list[str]:
        return [self.mrc_testbed, "run", FAILOVER_SCENARIO, "--backend", self.backend,
                "--target", self.target, "--quick", "--out", str(self.failover_folder)]

    def clean_command(self) -> list[str]:
        return [self.mrc_testbed, "clean"]

    @property
    def failover_folder(self) -> Path:
        return self.out / "failover"


# --- running commands ---------------------------------------------------------------------------

def run_logged(command: list[str], log: Path, cwd: Path, timeout_s: float) -> Optional[int]:
    """Run a command with its output in a log file; its exit status, or None when it overran the
    time limit (it is then stopped: SIGTERM, which the testbed unwinds like Ctrl-C, then SIGKILL)."""
    with log.open("w", encoding="utf-8") as out:
        out.write(f"$ cd {shlex.quote(str(cwd))} && {shlex.join(command)}\n")
        out.flush()
        try:
            process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        except OSError as exc:
            out.write(f"cannot start it: {exc}\n")
            return 127
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            out.write(f"\nselfcheck: stopped after {timeout_s:.0f} s\n")
            return None


def how_it_ended(status: Optional[int], timeout_s: float) -> str:
    """A failed command's end, in words."""
    if status is None:
        return f"stopped after {timeout_s:.0f} s"
    if status == 127:
        return "could not be started"
    return f"exit status {status}"


# --- what is installed --------------------------------------------------------------------------

def package_version(name: str) -> Optional[str]:
    """The installed version of a Debian package, or None."""
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def speedups_status(repo: Path) -> str:
    """Which build of the simulator's and the transport's hot path this Python runs (speedups)."""
    try:
        done = subprocess.run([sys.executable, "-m", "speedups", "status"], cwd=repo, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = (done.stdout.strip() or done.stderr.strip() or "no answer").splitlines()
    return lines[-1].removeprefix("speedups: ")


def installed_check(repo: Path = REPO) -> SelfCheckLine:
    """The p4lang packages' versions, the BMv2 program on PATH and the build of the hot path
    (for information)."""
    versions = []
    for name in P4LANG_PACKAGES:
        version = package_version(name)
        versions.append(f"{name} {version}" if version else f"{name} not installed")
    switch = shutil.which("simple_switch_grpc")
    details = [f"simple_switch_grpc: {Path(switch).resolve() if switch else 'not on PATH'}",
               f"netsim and transport: {speedups_status(repo)}"]
    return SelfCheckLine("installed", None, ", ".join(versions), details)


# --- conformance --------------------------------------------------------------------------------

def conformance_rows(output: str, target: str) -> list[tuple[str, str, str]]:
    """(case, status, detail) of every row of `mrc-testbed conformance`'s table for one target
    (a row: case, target, status, time, detail)."""
    rows = []
    for line in output.splitlines():
        words = line.split(maxsplit=4)
        if len(words) >= 3 and words[1] == target and words[2] in CONFORMANCE_STATUSES:
            rows.append((words[0], words[2], words[4].strip() if len(words) > 4 else ""))
    return rows


def conformance_check(settings: Settings) -> SelfCheckLine:
    """Run the conformance cases on the target: x/N pass, and which did not."""
    log = settings.out / "conformance.txt"
    status = run_logged(settings.conformance_command(), log, settings.repo, settings.timeout_s)
    rows = conformance_rows(log.read_text(encoding="utf-8", errors="replace"), settings.target)
    passed = [case for case, result, _ in rows if result == "PASS"]
    others = [f"{case} {result}" + (f": {detail}" if detail else "")
              for case, result, detail in rows if result != "PASS"]
    summary = f"{len(passed)}/{len(rows)} cases pass on {settings.target}"
    ok = status == 0 and bool(rows) and len(passed) == len(rows)
    if not ok:
        summary += f" ({how_it_ended(status, settings.timeout_s)}; log {log})"
    details = others[:6] + ([f"... and {len(others) - 6} more"] if len(others) > 6 else [])
    return SelfCheckLine("conformance", ok, summary, details)


# --- failover -----------------------------------------------------------------------------------

def read_summary(folder: Path) -> Optional[dict]:
    """A run's summary.json, or None when it wrote none (or an unreadable one)."""
    try:
        return json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def case_line(case: dict) -> str:
    """One case of the run: variant, transport, done (and when), bit-exact, fidelity if known."""
    done = (f"done in {case['completion_time_s']:.3g} s" if case.get("completed")
            else f"NOT done{unfinished(case)}")
    exact = "bit-exact" if case.get("bit_exact") else "NOT bit-exact"
    line = f"{case.get('variant', '?'):<12} {case.get('transport', '?'):<19} {done:<16} {exact}"
    verdict = fidelity_verdict(case)
    return line + (f"  {verdict}" if verdict else "")


def unfinished(case: dict) -> str:
    """How an unfinished case ended, when the testbed says: ' (cut at horizon, 92 %)' while it was
    still delivering, ' (stuck at 40 %)' when it was not."""
    share = case.get("delivered_fraction")
    got = f"{int(share * 100)} %" if isinstance(share, (int, float)) else "?"
    if case.get("ending") == "cut at horizon":
        return f" (cut at horizon, {got})"
    if case.get("ending") == "stuck":
        return f" (stuck at {got})"
    return ""


def fidelity_verdict(case: dict) -> Optional[str]:
    """The case's fidelity verdict (faithful or distorted), when the testbed reports one."""
    fidelity = case.get("fidelity")
    if isinstance(fidelity, dict):
        fidelity = fidelity.get("verdict")
    return str(fidelity) if fidelity else None


def failover_verdict(summary: dict) -> tuple[bool, str]:
    """Whether every MRC case finished bit-exact and valid (the run not interrupted), in words."""
    mrc = [c for c in summary.get("cases", []) if c.get("mode") == "mrc"]
    if not mrc:
        return False, "no MRC case in summary.json"
    good = [c for c in mrc if c.get("completed") and c.get("bit_exact")]
    invalid = [c for c in good if c.get("invalid_reasons")]
    text = f"MRC done and bit-exact in {len(good)}/{len(mrc)} variants"
    if invalid:
        text += f", {len(invalid)} of them invalid (the fault missed the collective)"
        good = [c for c in good if not c.get("invalid_reasons")]
    if summary.get("interrupted"):
        return False, text + " (the run was interrupted)"
    return len(good) == len(mrc), text


def failover_check(settings: Settings) -> SelfCheckLine:
    """Run the quick failover experiment on the target and judge its summary."""
    log = settings.out / "failover.txt"
    if settings.failover_folder.exists():
        shutil.rmtree(settings.failover_folder)
    status = run_logged(settings.failover_command(), log, settings.repo, settings.timeout_s)
    summary = read_summary(settings.failover_folder)
    if summary is None:
        return SelfCheckLine("failover", False,
                             f"no summary.json ({how_it_ended(status, settings.timeout_s)}; log {log})")
    ok, text = failover_verdict(summary)
    ok = ok and status in (0, RUN_EXIT_INVALID)          # an invalid case is judged from the summary
    text += f", quick, {summary.get('backend', '?')} backend on {settings.target}"
    if status not in (0, RUN_EXIT_INVALID):
        text += f" ({how_it_ended(status, settings.timeout_s)}; log {log})"
    cases = summary.get("cases", [])
    invalid = [f"invalid: {c.get('variant', '?')} / {c.get('transport', '?')}: {reason}"
               for c in cases for reason in c.get("invalid_reasons") or []]
    return SelfCheckLine("failover", ok, text, [case_line(c) for c in cases] + invalid[:3])


def fidelity_check(settings: Settings) -> SelfCheckLine:
    """The failover cases' fidelity verdicts, when the testbed reports them (for information)."""
    summary = read_summary(settings.failover_folder) or {}
    verdicts = [fidelity_verdict(c) for c in summary.get("cases", [])]
    known = [v for v in verdicts if v]
    if not known:
        return SelfCheckLine("fidelity", None, "not reported by this version of the testbed")
    faithful = sum(v == "faithful" for v in known)
    return SelfCheckLine("fidelity", None, f"faithful in {faithful}/{len(known)} failover cases")


# --- the whole check ----------------------------------------------------------------------------

def clean_up(settings: Settings) -> SelfCheckLine:
    """Remove what a failed command left running (namespaces, links, processes)."""
    log = settings.out / "clean.txt"
    status = run_logged(settings.clean_command(), log, settings.repo, settings.timeout_s)
    return SelfCheckLine("clean-up", status == 0, "mrc-testbed clean " + (
        "removed what the failed check left" if status == 0
        else f"failed ({how_it_ended(status, settings.timeout_s)}; log {log})"))


def render(checks: list[SelfCheckLine], settings: Settings) -> str:
    """The one-screen result."""
    marks = {True: "ok  ", False: "FAIL", None: "    "}
    lines = [f"==== MRC testbed self-check ({settings.target}) ===="]
    for check in checks:
        lines.append(f"{check.name:<12} {marks[check.passed]} {check.summary}")
        lines += [f"{'':<18}{detail}" for detail in check.details]
    failed = [check.name for check in checks if check.passed is False]
    lines.append(f"logs         {settings.out}")
    lines.append("result       " + ("PASS" if not failed else "FAIL: " + ", ".join(failed)))
    return "\n".join(lines)


def self_check(settings: Settings) -> tuple[list[SelfCheckLine], bool]:
    """Every check in turn; whether all passed."""
    settings.out.mkdir(parents=True, exist_ok=True)
    checks = [installed_check(settings.repo), conformance_check(settings), failover_check(settings),
              fidelity_check(settings)]
    if any(check.passed is False for check in checks):
        checks.append(clean_up(settings))
    return checks, all(check.passed is not False for check in checks)


def parse_args(argv: Optional[list[str]]) -> tuple[Settings, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mrc-testbed", default="mrc-testbed",
                        help="the mrc-testbed program (default: the one on PATH)")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help=f"the repository, where the commands run (default: {REPO})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for the logs, the failover's results and {RESULT_FILE} "
                             f"(default: {DEFAULT_OUT})")
    parser.add_argument("--target", choices=("bmv2", "model"), default="bmv2",
                        help="switch target of both checks (default: bmv2)")
    parser.add_argument("--backend", choices=("mininet", "netsim"), default="mininet",
                        help="backend of the failover run (default: mininet)")
    parser.add_argument("--timeout", type=float, default=1200.0,
                        help="seconds each command may take (default: 1200)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands the check would run, and run nothing")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    if not args.repo.is_dir():
        parser.error(f"--repo {args.repo}: no such folder")
    settings = Settings(args.mrc_testbed, args.repo, args.out, args.target, args.backend,
                        args.timeout)
    return settings, args.dry_run


def main(argv: Optional[list[str]] = None) -> int:
    settings, dry_run = parse_args(argv)
    if dry_run:
        for command in (settings.conformance_command(), settings.failover_command()):
            print(f"+ (in {settings.repo}) {shlex.join(command)}")
        return 0
    checks, passed = self_check(settings)
    text = render(checks, settings)
    print(text)
    (settings.out / RESULT_FILE).write_text(text + "\n", encoding="utf-8")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
