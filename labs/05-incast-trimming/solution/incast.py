"""Lab 5: incast and trimming (solution)."""

# Trim thresholds (packets queued at low priority) to compare; the queues hold 16 packets.
THRESHOLDS = [2, 8, 16]

# Predictions about experiments/incast.yaml (quick) on netsim.
PREDICTIONS = {
    "slowest incast": "RoCE (drop-tail)",          # which transport finishes the incast last
    "drop-tail loses packets at a full queue": True,
    "trimming loses packets at a full queue": False,
    "drop-tail makes MRC retire EVs": True,
    "trimming makes MRC retire EVs": False,
    "fewer trims at a higher threshold": True,     # over THRESHOLDS, in increasing order
}


def measure(record):
    """The incast's numbers from one run (an experiments.record.CaseRecord):

    incast_s   when the last incast flow (role "incast") got its last byte, None if one never did
    victim_bps the victim flow's (role "victim") payload bits per second over its own duration
    trimmed    packets the switches trimmed
    dropped    packets the switches dropped because a queue was full
    """
    incast = [f for f in record.flows if f.role == "incast"]
    finishes = [f.finish for f in incast]
    [victim] = [f for f in record.flows if f.role == "victim"]
    end = victim.finish if victim.finish is not None else record.end
    return {
        "incast_s": None if None in finishes else max(finishes) - record.start,
        "victim_bps": victim.received_bytes * 8 / (end - record.start),
        "trimmed": record.switch_stats.get("trimmed", 0),
        "dropped": record.switch_stats.get("queue_full_drops", 0),
    }
