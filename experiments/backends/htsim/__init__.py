"""uet-htsim (the Ultra Ethernet reference simulator) as a backend: a netsim case exported to
`htsim_uec`'s input files (`inputs.py`), run (`backend.py`), its per-flow completions read back
(`output.py`). docs/htsim.md lists how the two simulators' models differ."""
from experiments.backends.htsim.backend import (HtsimBackend, HtsimFailed, HtsimNotFound, find_htsim,
                                                htsim_unavailable)
from experiments.backends.htsim.inputs import BALANCERS, SETTINGS, HtsimInputs, Unmappable, export_case
from experiments.backends.htsim.output import HtsimOutputError, HtsimResult, parse_output

__all__ = ["BALANCERS", "SETTINGS", "HtsimBackend", "HtsimFailed", "HtsimInputs", "HtsimNotFound",
           "HtsimOutputError", "HtsimResult", "Unmappable", "export_case", "find_htsim", "htsim_unavailable",
           "parse_output"]
