"""The MRC wire format: the numbers every part agrees on (`constants`), decoded packet records
(`packets`), the fast byte codec the hosts and the switch model use (`codec`), and the same layout
as Scapy layers for building and dissecting packets by hand (`headers`); and the verbs by which
a simulated host drives a sans-IO transport endpoint, as a compiled base class both sides share
(`endpoint`).

It sits at the bottom of the house: it imports nothing else of the repository but `speedups`
(which says whether its packet records run compiled), and everything that sends, forwards or
inspects a packet imports it."""
import speedups

speedups.select()                    # before the first compiled module is imported
