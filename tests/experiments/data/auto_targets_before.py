"""How auto_targets.json was made: the "auto" fault targets main's code chose before faults were
planned from the topology (experiments.faults.busiest_targets, which built the baseline's traffic
on a second simulated network and traced its packets through the switch tables).

Run against main at the commit named in the JSON, from a checkout of it:

    cd /work/main && PYTHONPATH=/work/main .venv/bin/python \
        /work/wt/faultplan/tests/experiments/data/auto_targets_before.py > auto_targets.json

Made on 2026-12-05 from /work/main at c18bcbe (its working tree then differed from that commit
only in tests and documentation). Every scenario file of experiments/ (not a load sweep), full and --quick, at its own seed and at
seeds 1-4, every variant: the (link, spine) chosen. Not imported by the tests (the function it
calls no longer exists); kept to say how the expected data were made. The rows of
incast-8x8x8.yaml (added 2026-12-06) were made the same way: this loop on that file alone, with
the code of c18bcbe (`git archive c18bcbe`) and the file copied into its experiments/.
"""
import json
import subprocess
import sys
from pathlib import Path

import yaml

from experiments.faults import busiest_targets
from experiments.scenario import load_scenario
from experiments.workloads import variant_topology

SEEDS = (None, 1, 2, 3, 4)     # None: the scenario's own seed


def main() -> None:
    rows, done = [], set()
    for path in sorted(Path("experiments").glob("*.yaml")):
        if yaml.safe_load(path.read_text()).get("kind"):
            continue                                    # a load sweep, not a scenario
        for quick in (False, True):
            for seed in SEEDS:
                scenario = load_scenario(path, quick=quick, seed=seed)
                for case in scenario.cases():
                    key = (path.name, quick, scenario.seed, case.variant.label)
                    if key in done:
                        continue
                    done.add(key)
                    topo = variant_topology(case.variant)
                    try:
                        link, spine = busiest_targets(case, topo)
                    except ValueError as error:
                        rows.append({"file": path.name, "quick": quick, "seed": scenario.seed,
                                     "variant": case.variant.label, "error": str(error)})
                        continue
                    rows.append({"file": path.name, "quick": quick, "seed": scenario.seed,
                                 "variant": case.variant.label, "link": list(link), "spine": spine})
                    print(path.name, quick, scenario.seed, case.variant.label, link, spine, file=sys.stderr)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    json.dump({"made_by": "tests/experiments/data/auto_targets_before.py on main at " + commit,
               "targets": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
