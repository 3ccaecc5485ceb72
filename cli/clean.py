"""`mrc-testbed clean`: remove what crashed runs left (processes, namespaces, interfaces).

Acts only on what runs recorded in their state files (testbed/registry.py), by PID (checked
against the recorded start time) and by recorded name. A run whose process is still alive is
left alone unless --force is given. Since runs have a supervisor (testbed/supervisor.py), a run
removes its own leftovers when it dies; this command is for what older versions left (or a run
whose supervisor was killed too). It also removes the conformance runner's lab namespaces that
older versions did not record (`testbed.registry.stray_netns`), unless --run names runs.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from cli.errors import fail
from testbed.registry import clean_run, list_runs, remove_netns, stray_netns


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="also clean runs whose testbed process is still running")
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    parser.add_argument("--run", metavar="RUN_ID", action="append",
                        help="clean only this run (repeatable; default: every recorded run and the "
                             "conformance namespaces no run recorded)")
    parser.add_argument("--cluster", metavar="FILE", type=Path,
                        help="also on every server of this cluster file: end what runs of this machine "
                             "that are over left there, and remove their folders")


def run(args: argparse.Namespace) -> int:
    runs = list_runs()
    strays = [] if args.run else stray_netns(runs)
    if args.run:
        unknown = set(args.run) - {state.run_id for state in runs}
        for run_id in sorted(unknown):
            print(f"{run_id}: no such recorded run")
        runs = [state for state in runs if state.run_id in args.run]
    for state in runs:
        if state.owner_alive() and not args.force:
            print(f"{state.run_id}: still running (pid {state.owner_pid}); skipped (use --force)")
            continue
        if args.dry_run:
            print(f"{state.run_id}: {len(state.processes)} processes, {len(state.interfaces)} "
                  f"interfaces, {len(state.netns)} namespaces recorded")
            continue
        print(clean_run(state).describe())
    for name in strays:
        if args.dry_run:
            print(f"namespace {name}: a conformance lab no run recorded (an older version's)")
        elif remove_netns(name):
            print(f"namespace {name}: removed (a conformance lab no run recorded)")
        else:
            print(f"namespace {name}: could not be removed (ip netns del {name})")
    if not runs and not strays:
        print("nothing to clean")
    if args.cluster is not None:
        return clean_cluster(args.cluster, args.dry_run)
    return 0


def clean_cluster(path: Path, dry_run: bool) -> int:
    """Every server's run folders but those of runs still alive here (testbed.cluster.clean_servers)."""
    from testbed.cluster import clean_servers
    from testbed.clusterfile import ClusterFileError, load_cluster_file
    try:
        cluster = load_cluster_file(path)
    except ClusterFileError as error:
        return fail("clean", str(error))
    if dry_run:
        print(f"--cluster: would clean {len(cluster.servers)} servers of {path}")
        return 0
    alive = {state.run_id for state in list_runs() if state.owner_alive()}
    lines = clean_servers(cluster, keep=alive)
    for line in lines:
        print(line)
    return 1 if any("not reached" in line for line in lines) else 0
