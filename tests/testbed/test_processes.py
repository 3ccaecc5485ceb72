"""testbed.processes.descendants: the one walk of a process tree that every caller uses."""
from __future__ import annotations

import subprocess

from testbed.processes import descendants


def test_descendants_are_the_children_and_grandchildren_and_not_the_root_or_others():
    outside = subprocess.Popen(["sleep", "30"])
    # sh starts a sleep in a subshell of its own: a grandchild of the root, beside a child
    # (each echo comes after the fork before it: once both are read, the three processes exist)
    root = subprocess.Popen(["sh", "-c", "(sleep 30 & echo inner; wait) & sleep 30 & echo outer; wait"],
                            stdout=subprocess.PIPE, text=True)
    below = []
    try:
        assert sorted(root.stdout.readline().strip() for _ in range(2)) == ["inner", "outer"]
        below = descendants(root.pid)
        assert len(below) == 3 and root.pid not in below and outside.pid not in below   # subshell, two sleeps
        assert set(descendants(root.pid, outside.pid)) == set(below)        # a sleep has no children
    finally:
        for proc in (root, outside):
            proc.kill()
            proc.wait()
        for pid in below:
            subprocess.run(["kill", "-9", str(pid)], capture_output=True)
