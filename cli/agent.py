"""`mrc-testbed agent`: one host agent process running a job.

The agent is a program of its own (`python -m host_agent.agent`, as the testbed starts it in a
host's namespace), so its options are defined there; this command runs the same program.
"""
from host_agent.agent import add_arguments, run

__all__ = ["add_arguments", "run"]
