"""The switch graph of one plane and its shortest paths (hosts are never transit nodes)."""
from __future__ import annotations

from collections import deque
from typing import Callable

from topologies.model import LinkEnd, Topology
from wire.constants import USID_BITS


class PlaneGraph:
    """Switches of one plane and the switch-to-switch links between them. The distances and the
    shortest paths towards a switch are computed once, when first asked, and kept with the graph."""

    def __init__(self, topo: Topology, plane: int):
        self.topo = topo
        self.plane = plane
        switches = topo.switches_of_plane(plane)
        self._order = {s.name: s.index for s in switches}
        self._usid = {s.name: s.usid for s in switches}
        self._adjacent: dict[str, list[LinkEnd]] = {name: [] for name in self._order}
        for name in self._order:
            for far in topo.neighbors(name):
                if far.node in self._order:
                    # (neighbour switch, local port towards it), ordered by neighbour index
                    self._adjacent[name].append(LinkEnd(far.node, topo.port_towards(name, far.node)))
            self._adjacent[name].sort(key=lambda end: self._order[end.node])
        self._distance_cache: dict[str, dict[str, int]] = {}
        # target -> switch -> its shortest paths there, as switch names and as packed uSIDs (`_walk`)
        self._path_cache: dict[str, dict[str, tuple[tuple[str, ...], ...]]] = {}
        self._usid_cache: dict[str, dict[str, tuple[int, ...]]] = {}

    @property
    def switches(self) -> list[str]:
        return list(self._order)

    def adjacent(self, switch: str) -> list[LinkEnd]:
        """(neighbour switch, local port) pairs of `switch`, by neighbour index."""
        return list(self._adjacent[switch])

    def usids(self, path: tuple[str, ...]) -> list[int]:
        """The uSIDs of the switches of `path`, in its order."""
        usid = self._usid
        return [usid[name] for name in path]

    def distances_to(self, target: str) -> dict[str, int]:
        """Hop count from every switch that can reach `target` (breadth-first, cached)."""
        distance = self._distance_cache.get(target)
        if distance is None:
            distance = self._distance_cache[target] = {target: 0}
            queue = deque([target])
            while queue:
                here = queue.popleft()
                for end in self._adjacent[here]:
                    if end.node not in distance:
                        distance[end.node] = distance[here] + 1
                        queue.append(end.node)
        return distance

    def next_hops(self, switch: str, target: str) -> list[LinkEnd]:
        """Neighbours of `switch` on a shortest path to `target` (empty if unreachable or there)."""
        distance = self.distances_to(target)
        here = distance.get(switch)
        if not here:                                 # None: cannot reach it; 0: is it
            return []
        closer = here - 1
        return [end for end in self._adjacent[switch] if distance.get(end.node) == closer]

    def ecmp_ports(self, switch: str, target: str) -> tuple[int, ...]:
        """The ports of `switch` on a shortest path to `target`, in the order of an ECMP group's
        members (by port number): the group the controller installs towards a host behind `target`,
        whose member `i` the pipeline's hash picks (`pipeline_contract.ecmp`)."""
        return tuple(sorted(end.port for end in self.next_hops(switch, target)))

    def shortest_paths(self, source: str, target: str) -> list[tuple[str, ...]]:
        """Every shortest switch path from `source` to `target`, in lexicographic index order."""
        distance = self.distances_to(target)
        if source not in distance:
            return []
        return list(self._walk(source, target, self._path_cache.setdefault(target, {}), _with_name))

    def shortest_path_usids(self, source: str, target: str) -> tuple[int, list[int]]:
        """The uSIDs of `shortest_paths(source, target)`' switches without the paths themselves:
        (switches per path, one number per path, in the same order, holding its switches' uSIDs
        USID_BITS each, the first switch's highest). All of them have the same length; (0, [])
        when `target` cannot be reached."""
        distance = self.distances_to(target)
        if source not in distance:
            return 0, []
        known = self._usid_cache.setdefault(target, {})
        return distance[source] + 1, list(self._walk(source, target, known, self._with_usid))

    def _walk(self, switch: str, target: str, known: dict, prepend: Callable) -> tuple:
        """The shortest paths from `switch` (which reaches `target`) to `target`, written by
        `prepend(switch, hops, tails)`: the paths from `switch`, `hops` away from `target`, given
        `tails`, its next hops' paths in their order (none at `target`). Made once per switch and
        target and kept in `known` (the cache of the form `prepend` writes): the paths of every
        source towards a target share those of the switches they cross (a fat-tree's paths through
        one spine are made once, not once per source)."""
        paths = known.get(switch)
        if paths is None:
            tails = [self._walk(end.node, target, known, prepend) for end in self.next_hops(switch, target)]
            paths = known[switch] = prepend(switch, self._distance_cache[target][switch], tails)
        return paths

    def _with_usid(self, switch: str, hops: int, tails: list[tuple[int, ...]]) -> tuple[int, ...]:
        """`_walk`'s paths as packed uSIDs (`shortest_path_usids`): `switch`'s uSID above those of
        the `hops` switches after it."""
        head = self._usid[switch] << (USID_BITS * hops)
        if not hops:
            return (head,)
        return tuple(head | rest for paths in tails for rest in paths)


def _with_name(switch: str, hops: int, tails: list[tuple[tuple[str, ...], ...]]) -> tuple[tuple[str, ...], ...]:
    """`PlaneGraph._walk`'s paths as switch names (`shortest_paths`): `switch` before the rest."""
    if not hops:
        return ((switch,),)
    return tuple((switch, *rest) for paths in tails for rest in paths)
