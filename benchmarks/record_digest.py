"""Digests of netsim's records on a fixed set of cases: the check that a speed change changed no result.

    python -m benchmarks.record_digest            # one line per case: digest, case
    MRC_PURE_PYTHON=1 python -m benchmarks.record_digest

A change to the simulator's or the transport's hot path must leave every record as it was. Run
this before and after the change, on both builds (compiled, and pure Python with MRC_PURE_PYTHON=1):
every line must be the same. The cases are issue 29's two permutations (benchmarks.netsim_vs_htsim)
and the first cases of some quick scenarios (incast with and without trimming, gray loss, the loss
sweep, failover, the failure cascade): together they cross spraying, trimming, ECN, random loss,
dead links and rerouting. A digest is the SHA-256 of the case's record as sorted JSON (the record
holds no wall-clock time: netsim is deterministic).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (scenario file, how many of its quick cases): the cases after the two permutations
SCENARIOS = (("incast.yaml", 2), ("gray.yaml", 2), ("loss-sweep.yaml", 3), ("failover.yaml", 2),
             ("cascade.yaml", 1))


def cases() -> list:
    """(label, case) of every case digested, in order."""
    from benchmarks.netsim_vs_htsim import cases as permutations
    from experiments.scenario import load_scenario

    chosen = list(permutations())
    for name, count in SCENARIOS:
        for case in load_scenario(ROOT / "experiments" / name, quick=True).cases()[:count]:
            chosen.append((f"{name}: {case.label}", case))
    return chosen


def digest(record) -> str:
    """The SHA-256 (hex, first 16 digits) of a CaseRecord as sorted JSON."""
    blob = json.dumps(record.as_dict(), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.record_digest", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    import speedups
    from experiments.backends.netsim_backend import NetsimBackend

    print(f"build: {speedups.build_in_use()}", flush=True)
    for label, case in cases():
        print(f"{digest(NetsimBackend().run_case(case))}  {label}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
