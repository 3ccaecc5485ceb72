"""Run the case files under p4lang's PTF against simple_switch_grpc on veths made here.

    sudo PATH=/opt/p4/bin:$PATH .venv/bin/python -m conformance.ptf_bench [-k TEXT] [--cases DIR] [-- PTF OPTIONS]

Creates the conformance lab (switch ports 1..8 on veths, in namespaces of their own), starts BMv2
with p4/build/mrc.json, and runs `ptf --test-dir conformance/ptf_tests` in the host namespace with
port N mapped to host end N and the switch's P4Runtime socket as test parameter; everything is
removed afterwards. The exit status is ptf's.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from conformance.case import CASES_DIR, load_cases
from conformance.process_targets import NPORTS, Bmv2Target

TEST_DIR = Path(__file__).resolve().parent / "ptf_tests"
REPO_ROOT = Path(__file__).resolve().parents[1]
QLEN = 1024          # frames PTF keeps per port (its default, 100, loses the larger cases' outputs)


def ptf_program() -> Path:
    """The ptf script installed beside this Python."""
    return Path(sys.executable).parent / "ptf"


def ptf_command(target: Bmv2Target, cases_dir: Path, names: list[str], extra: list[str]) -> list[str]:
    """The ptf command line for a started target: interfaces, test parameters, tests."""
    params = (f"grpc_addr='unix:{target.tmp}/p4rt.sock';cases='{cases_dir}';"
              f"bmv2_json='{target.bmv2_json}'")
    argv = [str(ptf_program()), "--test-dir", str(TEST_DIR), "--pypath", str(REPO_ROOT),
            "--log-file", f"{target.tmp}/ptf.log", "--qlen", str(QLEN), "--test-params", params]
    for n in range(1, NPORTS + 1):
        argv += ["--interface", f"{n}@{target.lab.host_if(n)}"]
    return argv + extra + [f"mrc_cases.{name}" for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.ptf_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="select", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--cases", default=str(CASES_DIR), help="folder of case files")
    parser.add_argument("ptf_args", nargs="*", help="more ptf options (after --)")
    args = parser.parse_args(argv)
    target = Bmv2Target()
    reason = target.unavailable() or (None if ptf_program().exists() else f"needs {ptf_program()} (pip install ptf)")
    if reason:
        print(f"ptf_bench: {reason}", file=sys.stderr)
        return 2
    names = [c.name for c in load_cases(Path(args.cases), args.select)]
    if not names:
        print(f"ptf_bench: no case matches {args.select!r}", file=sys.stderr)
        return 2
    target.start()
    try:
        target.reset(1)                     # the switch process; the tests program it themselves
        target.client.close()               # PTF's tests connect as the P4Runtime primary
        target.client = None
        for port in target.ports.values():  # PTF owns the host ends now
            port.close()
        target.ports = {}
        argv = ["ip", "netns", "exec", target.lab.host_ns] + ptf_command(target, Path(args.cases), names, args.ptf_args)
        return subprocess.run(argv, cwd=target.tmp).returncode
    finally:
        target.stop()


if __name__ == "__main__":
    sys.exit(main())
