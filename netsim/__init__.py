"""A deterministic discrete-event network for the sans-IO MRC transport.

Links with rate, delay and strict two-priority egress queues; switches that follow the
pipeline contract of docs/design.md on decoded packet objects (uSID shift-and-forward, LPM,
ECMP, trimming, ECN, faults); hosts that drive the transport endpoints they are given.
One entry: `from_topology(topo, programs)` builds the network of a `topologies.Topology` whose
switches run the given programs (the controller's). Everything is seeded: the same scenario
gives the same result. Its hot modules may run compiled (`speedups`): the same results, faster.
"""
import speedups

speedups.select()                    # before the first compiled module is imported

from netsim.host import SansIOTransport, SimHost
from netsim.link import SimLink
from netsim.network import Cable, Network
from netsim.sim import FewerCollections, NoCollections, Simulator
from netsim.switch import SimSwitch
from netsim.topology import from_topology

__all__ = ["Cable", "FewerCollections", "Network", "NoCollections", "SansIOTransport", "SimHost", "SimLink", "SimSwitch", "Simulator",
           "from_topology"]
