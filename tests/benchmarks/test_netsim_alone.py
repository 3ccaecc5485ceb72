"""netsim's case in a process of its own beside htsim_uec (benchmarks.case_alone, used by
benchmarks.netsim_vs_htsim): the child times the case apart from its start and imports, and the line
sets the case's own time against htsim's and prints the whole process's beside it."""
from __future__ import annotations

import pytest

from benchmarks import netsim_vs_htsim as bench


def alone_run(wall: float, cpu: float, process_wall: float, process_cpu: float, imports: float) -> dict:
    return {"wall_s": wall, "cpu_s": cpu, "process_wall_s": process_wall, "process_cpu_s": process_cpu,
            "imports_wall_s": imports, "completed": True}


def test_the_line_rates_the_case_and_prints_the_whole_process_beside_it():
    runs = [alone_run(0.50, 0.45, 1.10, 0.90, 0.40), alone_run(0.40, 0.42, 0.95, 0.85, 0.35)]
    line, wall_ratio, cpu_ratio = bench._alone_line("fat-tree", runs, htsim_s=0.25, htsim_cpu=0.20)
    # the fastest of the runs, the case's own time against htsim's
    assert (wall_ratio, cpu_ratio) == pytest.approx((0.40 / 0.25, 0.42 / 0.20))
    assert "the case 0.400 s wall, 0.420 s CPU = 1.6x, 2.1x" in line
    assert "not within issue 29's 2x" in line
    # what is left out is said, and the whole process (start to exit, as htsim's is timed) is printed
    assert "imports, 0.350 s wall, not counted" in line
    assert "0.950 s wall, 0.850 s CPU = 3.8x, 4.2x" in line


def test_a_case_alone_is_timed_apart_from_its_process_start_and_imports():
    from benchmarks.case_alone import run_alone
    from experiments.scenario import parse_scenario
    [case] = parse_scenario({"name": "alone", "seed": 1, "horizon_s": 0.05, "sample_interval_s": 0.001,
                             "topology": "leafspine:2x1x1", "link": {"rate_bps": 100_000_000_000, "delay_s": 1.0e-6, "mtu_payload": 4096},
                             "workload": {"kind": "permutation", "bytes": 65536, "chunk_bytes": 65536},
                             "transports": [{"name": "MRC", "mode": "mrc"}]}, path="<test>").cases()
    run = run_alone(case)
    assert run["completed"] and run["packets"] > 2 * 16            # two 64 KiB flows of 4 KB packets, 2+ hops
    assert 0 < run["cpu_s"] and 0 < run["imports_wall_s"]
    assert run["process_wall_s"] > run["wall_s"] + run["imports_wall_s"]   # the start and imports on top
    assert run["process_cpu_s"] >= run["cpu_s"] and run["peak_rss_bytes"] > 0
