"""Subcommands of `mrc-testbed` owned by the testbed: `up` and `clean` (see testbed/cli.py)."""
