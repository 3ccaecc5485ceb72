"""A sweep's results: its steps saved as JSON with the run's conditions, and its figure."""
from __future__ import annotations

import json
from pathlib import Path

from experiments.load_sweep.steps import LoadStep
from experiments.load_sweep.sweep_file import SweepSpec


def save_steps(steps: list[LoadStep], path: Path, conditions: dict) -> None:
    """The steps as JSON, with the run's conditions (target, machine load, rate)."""
    path.write_text(json.dumps({"conditions": conditions, "steps": [s.as_record() for s in steps]}, indent=1))


def plot_sweep(spec: SweepSpec, by_target: dict[str, list[LoadStep]], path: Path) -> None:
    """Shares (left) and the queue depth seen (right) against the measured offered load, per target,
    with the trim threshold and the ECN ramp drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    link = spec.topology_built().link_between(*spec.bottleneck)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"model": "-", "bmv2": "--"}
    for target, steps in by_target.items():
        x = [s.offered_load for s in steps]
        ls = styles.get(target, ":")
        left.plot(x, [s.trimmed_share for s in steps], "o" + ls, color="tab:red", label=f"trimmed ({target})")
        left.plot(x, [s.ecn_share for s in steps], "s" + ls, color="tab:blue", label=f"ECN-marked ({target})")
        right.plot(x, [s.depth_mean for s in steps], "o" + ls, color="tab:green", label=f"mean ({target})")
        right.plot(x, [s.depth_quantile(0.99) for s in steps], "^" + ls, color="tab:olive", label=f"p99 ({target})")
    left.set_xlabel("offered load (share of the bottleneck rate, measured)")
    left.set_ylabel("share of the packets arriving for the bottleneck")
    left.set_ylim(-0.02, 1.02)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.axhline(link.trim_threshold, color="tab:red", lw=1, label=f"trim threshold {link.trim_threshold}")
    right.axhspan(link.ecn_threshold, max(link.ecn_ramp_top, link.ecn_threshold + 0.1), color="tab:blue",
                  alpha=0.12, label=f"ECN ramp {link.ecn_threshold}..{link.ecn_ramp_top}")
    right.set_xlabel("offered load (share of the bottleneck rate, measured)")
    right.set_ylabel("queue depth seen by the pipeline (packets)")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.suptitle(f"{spec.label}\n{spec.topology}, bottleneck {spec.bottleneck[0]}->{spec.bottleneck[1]} at "
                 f"{link.rate_bps / 1e6:g} Mbit/s, {spec.payload_bytes} B payloads, {spec.step_s:g} s a step",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
