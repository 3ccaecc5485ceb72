"""`mrc-testbed run experiments/<name>.yaml`: run every case of a scenario, save and print results.

    mrc-testbed run experiments/failover.yaml                 # default backend (see experiments/runner.py)
    mrc-testbed run experiments/failover.yaml --backend netsim --quick --seed 7 --out /tmp/f
    mrc-testbed run experiments/failover.yaml --backend mininet --pcap     # + a pcap per switch port
    mrc-testbed run experiments/failover.yaml --no-calibrate  # no calibration: the fixed fallback rates
    mrc-testbed run experiments/failover.yaml --repeat 5      # every case 5 times: median and range
    mrc-testbed run experiments/loss-sweep.yaml --backend netsim --jobs 2      # 2 cases at once
    mrc-testbed run experiments/loss-sweep.yaml --backend netsim --cluster cluster.yaml   # on servers
    mrc-testbed run experiments/datacenter.yaml --backend htsim --transport MRC --variant incast   # uet-htsim

Exit status: 0 done, 1 a run error, 2 bad input, 3 done but a case is invalid (a fault missed its
workload: experiments/validity.py; `--allow-invalid` exits 0 then).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from cli.errors import fail
from experiments import parallel, repeats, results
from experiments.backends import BACKENDS, TARGETS
from experiments.backends.htsim.inputs import BALANCERS
from experiments.runner import PCAP_FOLDER, choose_backend, choose_link_rate, run_scenario, select_cases
from experiments.scenario import ScenarioError, load_scenario
from testbed.capture import add_pcap_arguments, capture_from_args
from testbed.logs import setup_logging


EXIT_INVALID = 3                    # the run finished, but a case is invalid (experiments/validity.py)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed run`."""
    parser.add_argument("scenario", help="scenario file, e.g. experiments/failover.yaml")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="netsim (in-process network, simulated time), mininet (the real testbed) or "
                             "htsim (uet-htsim's htsim_uec, on PATH or $HTSIM_UEC); "
                             "default: mininet when root with mnexec, else netsim")
    parser.add_argument("--balancer", choices=BALANCERS, default=None,
                        help="htsim backend: htsim_uec's load balancer (default: its own, mixed)")
    parser.add_argument("--target", choices=TARGETS, default="model",
                        help="switch target of the mininet backend (default: model)")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: the scenario's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: results/<scenario>-<date-time>)")
    parser.add_argument("--quick", action="store_true",
                        help="the scenario's small, fast version (its `quick:` overrides)")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL",
                        help="run only this variant (repeatable)")
    parser.add_argument("--transport", action="append", default=[], metavar="NAME",
                        help="run only this transport (repeatable)")
    parser.add_argument("--no-calibrate", action="store_true",
                        help="mininet backend without a calibration of the target on this machine: run "
                             "`rate_bps: auto` links at the fixed fallback rate instead of calibrating first")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run every case N times and report the median and range (min..max) of its "
                             "times; netsim runs repetition i with seed + i (default: 1)")
    parser.add_argument("--allow-invalid", action="store_true",
                        help=f"exit 0 even when a case is invalid (a fault missed its workload); "
                             f"by default such a run exits {EXIT_INVALID}")
    add_pcap_arguments(parser)          # mininet backend: pcaps in <results folder>/pcap/<case>/
    parallel.add_arguments(parser)      # --jobs N (netsim) / --cluster FILE (netsim: Dask; mininet: servers)


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed run`."""
    try:
        scenario = load_scenario(args.scenario, quick=args.quick, seed=args.seed)
    except ScenarioError as error:
        return fail("run", str(error))
    if args.repeat < 1:
        return fail("run", f"--repeat {args.repeat}: expected a number of runs per case, 1 or more")
    backend_name = choose_backend(args.backend)
    if args.balancer and backend_name != "htsim":
        return fail("run", f"--balancer {args.balancer} is htsim_uec's load balancer: add --backend htsim")
    try:
        capture = capture_from_args(args)
    except ValueError as error:
        return fail("run", str(error))
    if capture is not None and backend_name != "mininet":
        return fail("run", "--pcap captures the switch ports of the mininet backend; the "
                           f"{backend_name} backend has none (run as root with --backend mininet)")
    try:
        parallel.check_options(args.jobs, args.cluster, backend_name)
    except ValueError as error:
        return fail("run", str(error))
    folder = args.out or results.default_folder(scenario.name)
    setup_logging(getattr(args, "verbosity", 0), folder)
    try:
        cases = select_cases(scenario, args.variant, args.transport)
        link_rate = choose_link_rate(cases, backend_name, args.target, calibrate=not args.no_calibrate)
    except (RuntimeError, ValueError) as error:
        return fail("run", str(error), 2 if isinstance(error, ValueError) else 1)
    try:
        spread = args.cluster if backend_name == "mininet" else None      # one network over the servers
        with parallel.open_pool(args.jobs, None if spread else args.cluster) as pool:
            summaries, figures = run_scenario(scenario, backend_name, args.target, folder, args.quick,
                                              variants=args.variant, transports=args.transport,
                                              pcap=capture, link_rate=link_rate, repeat=args.repeat,
                                              pool=pool, cluster=spread, balancer=args.balancer)
    except parallel.PoolUnavailable as error:             # the cluster file's servers, not the scenario
        return fail("run", str(error), 1)
    except (RuntimeError, ValueError, KeyError) as error:
        return fail("run", f"{scenario.path}: {error}", 1)
    print(f"{scenario.title} ({backend_name} backend, {repeats.seeds_note(scenario.seed, args.repeat, backend_name)})")
    print(results.format_table(summaries))
    for line in results.note_lines(summaries):
        print(f"note: {line}")
    for line in results.fidelity_lines(summaries):
        print(f"distorted: {line}")
    invalid = results.invalid_lines(summaries)
    for line in invalid:
        print(f"INVALID: {line}")
    captured = f", {PCAP_FOLDER}/<case>/" if capture is not None else ""
    captured += ", htsim/<case>/: each htsim_uec run's inputs, command and output" if backend_name == "htsim" else ""
    print(f"results: {folder}  ({', '.join(f.name for f in figures)}, summary.json, summary.md, raw.jsonl{captured})")
    if invalid and not args.allow_invalid:
        return fail("run", f"{len({(s['variant'], s['transport']) for s in summaries if s.get('invalid_reasons')})} "
                           f"case(s) invalid: a fault missed the workload (exit status {EXIT_INVALID}; "
                           "--allow-invalid: 0)", EXIT_INVALID)
    return 0
