"""`python -m cli <command> ...`: the `mrc-testbed` command line."""
import sys

from cli.main import main

sys.exit(main())
