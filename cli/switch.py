"""`mrc-testbed switch`: one reference-model switch process.

The switch is a program of its own (`python -m refswitch.main`, as the testbed starts it in a
switch's namespace), so its options are defined there; this command runs the same program.
"""
from refswitch.main import add_arguments, run

__all__ = ["add_arguments", "run"]
