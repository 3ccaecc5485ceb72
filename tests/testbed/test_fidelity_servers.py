"""The fidelity verdict of a network over several servers names each reason's server, and the
sampler a server runs (testbed/cpu_sample.py) reads only the PID files of its own nodes."""
from __future__ import annotations

import os
import subprocess
import sys

from testbed.cpu_sample import folder_sample
from testbed.fidelity import Verdict


def test_every_reason_of_a_spread_run_names_the_servers_of_its_nodes():
    verdict = Verdict(reasons=["s1->s3: 2.0% of packets lost before the pipeline (40 of 2000)",
                               "h2-flow0-tx: timer wake-ups late by 3 ms at p99",
                               "s3 port 2: queue served at 80% of its 1 Mbit/s while backlogged",
                               "server 10.0.0.2: s3: CPU 97% of a core at its busiest (mean 60%)"],
                      servers={"s1": "10.0.0.1", "s3": "10.0.0.2", "h2": "10.0.0.1"})
    assert verdict.as_dict()["reasons"] == [
        "s1->s3 (servers 10.0.0.1, 10.0.0.2): 2.0% of packets lost before the pipeline (40 of 2000)",
        "h2-flow0-tx (server 10.0.0.1): timer wake-ups late by 3 ms at p99",
        "s3 port 2 (server 10.0.0.2): queue served at 80% of its 1 Mbit/s while backlogged",
        "server 10.0.0.2: s3: CPU 97% of a core at its busiest (mean 60%)"]
    alone = Verdict(reasons=["s1->s3: 2.0% of packets lost"])          # one machine: as it was
    assert alone.as_dict()["reasons"] == ["s1->s3: 2.0% of packets lost"]


def test_the_sampler_reads_its_nodes_pid_files_and_runs_as_a_program_of_its_own(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for name, pid in (("s1", sleeper.pid), ("h1-p0", os.getppid()), ("s2", sleeper.pid), ("s3", os.getpid())):
            (tmp_path / f"{name}.pid").write_text(f"{pid} 0\n")
        (tmp_path / "s4.pid").write_text("")                         # being written: skipped
        sample = folder_sample(str(tmp_path), frozenset({"s1", "h1", "s3", "s4"}))
        assert sorted(sample["processes"]) == ["h1-p0", "s1"]          # s3 is the sampler itself
        assert sample["machine"][1] >= sample["machine"][0] > 0 and sample["cpus"] >= 1
        # the file's source alone, with no package to import (as a server runs it)
        source = (tmp_path.parent / "sampler.py")
        source.write_text(open(sys.modules["testbed.cpu_sample"].__file__).read())
        proc = subprocess.Popen([sys.executable, "-I", "-c", source.read_text(), str(tmp_path), "0.05", "s2"],
                                stdout=subprocess.PIPE, text=True, cwd="/")
        try:
            import json
            lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        finally:
            proc.kill()
            proc.wait()
        assert [sorted(doc["processes"]) for doc in lines] == [["s2"], ["s2"]] and lines[1]["t"] > lines[0]["t"]
    finally:
        sleeper.kill()
        sleeper.wait()
