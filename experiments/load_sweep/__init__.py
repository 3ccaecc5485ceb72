"""A load sweep through one bottleneck queue on Mininet: trimmed share, ECN-marked share and the queue
depth the pipeline saw, against the offered load (`experiments/trim-sweep.yaml`, `mrc-testbed sweep`).

    sweep_file.py   the sweep file: `SweepSpec` (its model) and `load_sweep_spec`
    steps.py        the load steps on a running network: senders' specs, counters read, `run_sweep`
    figure.py       the steps saved as JSON and drawn

The load generators themselves, and how they are started together, are `testbed.loadgen`.

    spec = load_sweep_spec("experiments/trim-sweep.yaml")
    steps = run_sweep(spec, target="model", out_dir=Path("results/trim-sweep"))
    plot_sweep(spec, {"model": steps}, Path("results/trim-sweep/trim-sweep.png"))
"""
