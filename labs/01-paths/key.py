"""Lab 1's figures for the instructor guide (labs/answer_key.py): the solution's checks and the
permutation runs they measure."""
from experiments.metrics import flow_throughputs
from labs.checking import Workspace
from topologies.paths import host_paths
from topologies.spec import topology_from_spec

TRANSPORTS = {"mrc": "MRC spraying", "ecmp": "RoCE ECMP", "qps": "RoCE ECMP, 4 QPs"}
NAMES = ("paths", "topologies", "probes", "q1_h1_h5", "q1_h1_h4",
         *(f"{k}.{f}" for k in TRANSPORTS for f in ("imbalance", "flow_min", "flow_max", "completion")))


def figures(lab, scratch):
    check = lab.check_module()
    ws = Workspace(lab.solution)
    paths = check.check_paths(ws)              # "18 paths on 3 topologies match, ..."
    probes = check.check_shift(ws)             # "9 packets followed ..."
    out = {"paths": paths.split()[0], "topologies": paths.split(" on ")[1].split()[0], "probes": probes.split()[0],
           "q1_h1_h5": str(len(host_paths(topology_from_spec("leafspine:2x4x4"), "h1", "h5"))),
           "q1_h1_h4": str(len(host_paths(topology_from_spec("multiplane:2x2x2x2"), "h1", "h4")))}
    imbalance = check.check_imbalance(ws)
    runs = dict(check._permutation_runs())
    for key, name in TRANSPORTS.items():
        record = runs[name]
        rates = flow_throughputs(record)
        out[f"{key}.imbalance"] = imbalance.split(f"{name}: ")[1].split(";")[0]
        out[f"{key}.flow_min"] = f"{min(rates) / 1e6:.1f}"
        out[f"{key}.flow_max"] = f"{max(rates) / 1e6:.1f}"
        out[f"{key}.completion"] = f"{record.completion_time:.3f}"
    return out
