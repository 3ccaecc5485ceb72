"""Lab 3: run one transfer on netsim with your SACK processor and compare it with MRC's default
and with go-back-N (the RoCE-style baseline). Run it with the testbed's Python:

    python explore.py --loss 0.01          # 1 % of the data lost at the receiver's last hop
    python explore.py --loss 0.2 --size 2000000 --seed 3
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_agent.transport import Policies                     # noqa: E402
from host_agent.transport.policies import MrcPathMonitor     # noqa: E402
from labs import transfers                                     # noqa: E402
from sack import SelectiveRepeat                               # noqa: E402


class HeldPathMonitor(MrcPathMonitor):
    """MRC's path monitor, except that a timeout retires no EV (as in the checks)."""

    def on_timeout(self, evset, timeout, now):
        return []


def one_run(label: str, mode: str, policies, loss: float, size: int, seed: int) -> None:
    net = transfers.fabric(seed)
    net.switches["s2"].set_fault(net.port("s2", "h2"), drop_prob=loss)
    flow = transfers.run_flows(net, [transfers.Flow("h1", "h2", size)], transfers.config(mode, sack_loss_detection=False), policies,
                               until=1.0).flows[0]
    tx, rx = flow.sender.stats, flow.receiver.stats
    print(f"{label:<28} {'yes' if flow.exactly_once else 'NO':>4} {flow.goodput_bps / 1e9:>9.2f} "
          f"{net.switches['s2'].counters['fault_drops_data']:>6} {tx['retransmitted']:>7} {tx['retx_sack']:>6} "
          f"{tx['retx_timeout']:>8} {tx.get('retx_nack', 0):>6} {rx['duplicates']:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loss", type=float, default=0.01, help="share of data lost at the last hop")
    parser.add_argument("--size", type=int, default=1_000_000, help="bytes to send")
    parser.add_argument("--seed", type=int, default=7, help="simulator seed (the loss pattern)")
    args = parser.parse_args()
    print(f"h1 -> h2, {args.size} bytes, {args.loss:.1%} loss at s2 -> h2, seed {args.seed}")
    print(f"{'transport':<28} {'ok':>4} {'Gbit/s':>9} {'lost':>6} {'resent':>7} {'sack':>6} "
          f"{'timeout':>8} {'nack':>6} {'dups':>6}")
    for label, mode, policies in (
            ("your SelectiveRepeat", "mrc", Policies(sack=SelectiveRepeat, path_monitor=HeldPathMonitor)),
            ("MRC default (SACK: nothing)", "mrc", Policies(path_monitor=HeldPathMonitor)),
            ("go-back-N (roce)", "roce", None)):
        one_run(label, mode, policies, args.loss, args.size, args.seed)


if __name__ == "__main__":
    main()
