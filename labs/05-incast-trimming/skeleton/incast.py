"""Lab 5: incast and trimming.

Write your predictions BEFORE you run the experiment (README, step 2), then measure and correct them
(keep a note of what surprised you). `mrc-testbed lab check 5 --dir <this folder>` runs
experiments/incast.yaml (quick) on netsim, at the default threshold and at each of THRESHOLDS.
"""

# TODO: three or more trim thresholds (packets queued at low priority, 1..16) to compare;
# the queues hold 16 packets.
THRESHOLDS = []

# TODO: predictions about experiments/incast.yaml (quick) on netsim. Replace each None.
PREDICTIONS = {
    "slowest incast": None,            # "MRC + trimming", "MRC drop-tail" or "RoCE (drop-tail)"
    "drop-tail loses packets at a full queue": None,      # True or False
    "trimming loses packets at a full queue": None,
    "drop-tail makes MRC retire EVs": None,
    "trimming makes MRC retire EVs": None,
    "fewer trims at a higher threshold": None,            # over THRESHOLDS, in increasing order
}


def measure(record):
    """The incast's numbers from one run (an experiments.record.CaseRecord):

    incast_s   when the last incast flow (role "incast") got its last byte, None if one never did
    victim_bps the victim flow's (role "victim") payload bits per second over its own duration
    trimmed    packets the switches trimmed
    dropped    packets the switches dropped because a queue was full
    """
    # TODO: record.flows (FlowRecord: role, finish, received_bytes), record.start, record.end,
    # record.switch_stats (summed switch counters: "trimmed", "queue_full_drops")
    return {"incast_s": None, "victim_bps": 0.0, "trimmed": 0, "dropped": 0}
