"""How much of a netsim case is its set-up: CPU seconds before the first event, beside the whole case.

    .venv/bin/python -m benchmarks.netsim_setup [--repeat 3] [--fat-tree-k16]

The set-up is everything `NetsimBackend.run_case` does before the simulator runs its first sample
at simulated time 0: the topology, the controller's programs and the simulated network, every
host's endpoint, the connections with their paths and EV sets, the flows' payload (the workload's
start at time 0 is counted with the run). The rest is the run and the records. Cases: the two set
beside uet-htsim (`benchmarks.netsim_vs_htsim.cases`), each `--repeat` times after a first run that
warms the imports: the fastest and the median; `--fat-tree-k16` adds the fat-tree k=16 permutation of
`bench_netsim` once (1,024 hosts, about 20 s). CPU time (process time) is the figure: the machine
may be shared; its load average is printed.
"""
from __future__ import annotations

import argparse
import os
import time


def split_case(case) -> tuple[float, float]:
    """(set-up, whole case) CPU seconds of one run of `case` on netsim."""
    from experiments.backends.netsim_backend import NetsimBackend
    first: list[float] = []

    def progress(share: float) -> None:
        if not first:
            first.append(time.process_time())        # the first sample, at simulated time 0

    began = time.process_time()
    NetsimBackend().run_case(case, progress)
    return first[0] - began, time.process_time() - began


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case; the fastest counts (default 3)")
    parser.add_argument("--fat-tree-k16", action="store_true", help="also the fat-tree k=16 permutation, once")
    options = parser.parse_args(argv)
    import speedups
    from benchmarks.netsim_vs_htsim import cases
    compared = cases()
    if options.fat_tree_k16:
        from benchmarks.bench_netsim import fat_tree_permutation_case
        compared.append(("fat-tree k=16 permutation 1 MiB", fat_tree_permutation_case(16)))
    split_case(compared[0][1])                           # imports warmed
    print(f"netsim set-up per case ({speedups.build_in_use()}; load average {os.getloadavg()[0]:.2f})")
    for label, case in compared:
        runs = [split_case(case) for _ in range(1 if "k=16" in label else options.repeat)]
        setups, wholes = sorted(run[0] for run in runs), sorted(run[1] for run in runs)
        print(f"   {label}: set-up {setups[0]:.3f} s CPU (median {setups[len(runs) // 2]:.3f}) of a whole case "
              f"of {wholes[0]:.3f} s (median {wholes[len(runs) // 2]:.3f}), fastest of {len(runs)}", flush=True)
    print(f"   load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
