"""The `mrc-testbed` command line: `cli/main.py` parses it, and the command `mrc-testbed X` is the
module `cli/X.py` (its options in `add_arguments`, its work in `run`), which calls the verbs of the
packages below. `python -m cli X ...` runs the same command."""
