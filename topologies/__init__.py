"""Topology description, addressing plan, path enumeration, builders, YAML files and drawing.

    from topologies import topology_from_spec, all_pairs_paths
    topo = topology_from_spec("leafspine:4x2x2")      # or fattree:4, multiplane:2x2x2x2, a .yaml file

Modules: model (Host, Switch, Link, Topology, link defaults), addressing (uSIDs, locators, NIC
addresses and MACs), graph (shortest paths of one plane), paths (uSID paths per host pair),
builders (dumbbell, leaf_spine, fat_tree, multi_plane), yamlfile (load/save), spec (the `--topo`
parser over both), draw (PNG, the `mrc-testbed draw` command).
"""
from topologies.builders import dumbbell, fat_tree, leaf_spine, multi_plane
from topologies.model import Host, HostNic, Link, LinkEnd, Switch, Topology, TopologyError
from topologies.paths import Path, PathError, all_pairs_paths, host_paths
from topologies.spec import TopologySpecError, topology_from_spec

__all__ = ["Host", "HostNic", "Link", "LinkEnd", "Path", "PathError", "Switch", "Topology", "TopologyError",
           "TopologySpecError", "all_pairs_paths", "dumbbell", "fat_tree", "host_paths", "leaf_spine",
           "multi_plane", "topology_from_spec"]
