"""The transport on a simulated network: the one driver of `netsim` for the netsim backend, the labs
and the tests.

`network(topo)` (or the small `leaf_spine_fabric(...)`) builds a netsim network with the controller's routes
and the link defaults, written once here; `Simulation(net, config)` puts a transport `Endpoint` on its
hosts, opens connections (the one QP numbering, `QpNumbers`; paths by the transport's one rule, `connection_paths`),
carries checked flows and collectives, runs the simulator and reports what the applications got.
`run_flows` and `run_collective` are a whole run of either.
"""
from simulation.runs import Simulation, run_collective, run_flows
from simulation.networks import (CABLE_DELAY_S, LEAF_SPINE_DELAY_S, LEAF_SPINE_LINK, LEAF_SPINE_TIMERS,
                                 leaf_spine_config, leaf_spine_fabric, network)
from simulation.outcomes import Flow, FlowOutcome, SimulationResult

__all__ = ["CABLE_DELAY_S", "Flow", "FlowOutcome", "LEAF_SPINE_DELAY_S", "LEAF_SPINE_LINK", "LEAF_SPINE_TIMERS",
           "Simulation", "SimulationResult", "leaf_spine_config", "leaf_spine_fabric", "network",
           "run_collective", "run_flows"]
