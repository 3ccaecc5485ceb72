"""testbed.capture: whole packets by default, --pcap-snaplen cuts them; `mrc-testbed run --pcap`
passes the capture down to the mininet backend's network and refuses it on netsim."""
from __future__ import annotations

import argparse

import pytest

from cli import run as run_cmd
from experiments import backends
from experiments.backends.mininet_backend import MininetBackend
from experiments.scenario import load_scenario
from testbed import network
from testbed.capture import MAX_SNAPLEN, PcapCapture, add_pcap_arguments, capture_from_args


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_pcap_arguments(parser)
    return parser.parse_args(list(argv))


def test_whole_packets_unless_a_snapshot_length_is_given():
    assert capture_from_args(_parse()) is None
    assert capture_from_args(_parse("--pcap")) == PcapCapture(0)
    assert PcapCapture().tcpdump_args() == ["-s", "0"]             # tcpdump: 0 = whole packets
    assert capture_from_args(_parse("--pcap-snaplen", "128")) == PcapCapture(128)
    assert capture_from_args(_parse("--pcap", "--pcap-snaplen", "256")).tcpdump_args() == ["-s", "256"]


def test_bad_snapshot_lengths_are_named():
    with pytest.raises(ValueError, match="--pcap-snaplen 0"):
        capture_from_args(_parse("--pcap-snaplen", "0"))
    with pytest.raises(ValueError, match="snapshot length -1"):
        PcapCapture(-1)
    with pytest.raises(ValueError, match=str(MAX_SNAPLEN)):
        PcapCapture(MAX_SNAPLEN + 1)
    with pytest.raises(ValueError):
        PcapCapture(True)


def test_a_flag_or_a_capture_is_accepted_where_pcap_was_a_flag():
    assert PcapCapture.of(True) == PcapCapture() and PcapCapture.of(False) is None
    assert PcapCapture.of(None) is None and PcapCapture.of(PcapCapture(99)) == PcapCapture(99)
    with pytest.raises(TypeError, match="pcap=256"):
        PcapCapture.of(256)
    from topologies.builders import leaf_spine
    assert network.TestbedNetwork(leaf_spine(2, 1, 1), pcap=True).pcap == PcapCapture()
    assert network.TestbedNetwork(leaf_spine(2, 1, 1)).pcap is None


def _run_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    return parser.parse_args(["experiments/failover.yaml", *argv])


def test_run_refuses_pcap_without_the_mininet_backend(tmp_path, capsys):
    assert run_cmd.run(_run_args("--backend", "netsim", "--pcap", "--out", str(tmp_path / "o"))) == 2
    err = capsys.readouterr().err
    assert "--pcap" in err and "mininet" in err
    assert not (tmp_path / "o").exists()
    assert run_cmd.run(_run_args("--backend", "netsim", "--pcap-snaplen", "-3")) == 2
    assert "--pcap-snaplen -3" in capsys.readouterr().err
    with pytest.raises(ValueError, match="mininet"):
        backends.make_backend("netsim", pcap=PcapCapture())


class _Stop(Exception):
    pass


def test_the_mininet_backend_hands_the_capture_to_its_network(tmp_path, monkeypatch):
    seen = {}

    def fake_network(topo, **kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(network, "TestbedNetwork", fake_network)
    case = load_scenario("experiments/failover.yaml", quick=True).cases()[0]
    backend = MininetBackend("model", run_root=tmp_path, pcap=PcapCapture(200))
    with pytest.raises(_Stop):
        backend.run_case(case)
    assert seen["pcap"] == PcapCapture(200)
