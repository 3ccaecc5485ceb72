"""The `routes` command prints a switch's computed tables."""
import argparse

from cli import routes as cli


def run(argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    status = cli.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_one_switch(capsys):
    status, out, _ = run(["--topo", "leafspine:3x2x1", "--switch", "s1"], capsys)
    assert status == 0
    assert out.startswith("s1  device_id 1  plane 0")
    assert "dst_usid_prefix=fc00:0:100::/48 [s1]  -> usid_shift()" in out
    assert "dst_addr=fc00:0:1001::/48 [h2-eth0]  -> ecmp_select(group=1, size=2)" in out
    assert "group=1 index=1  -> forward(port=3)" in out
    assert "port=1 [h1]  -> set_port_config(trim_threshold=8, ecn_threshold=4, host_facing=1, ecn_max_threshold=4)" in out
    assert "port 3   rate 20 Mbit/s  depth 64 pkts  -> s5:1" in out
    assert "s2  device_id" not in out


def test_every_switch_by_default(capsys):
    status, out, _ = run(["--topo", "dumbbell:1"], capsys)
    assert status == 0 and "s1  device_id 1" in out and "s2  device_id 2" in out


def test_rerouted_tables(capsys):
    status, out, _ = run(["--topo", "leafspine:3x2x1", "--switch", "s1", "--down", "s1-s4"], capsys)
    assert status == 0
    assert "ecmp_select" not in out and "[s4]  -> forward" not in out
    assert "dst_addr=fc00:0:1001::/48 [h2-eth0]  -> forward(port=3)" in out


def test_errors_name_the_bad_thing(capsys):
    status, _, err = run(["--topo", "leafspine:3x2x1", "--switch", "s9"], capsys)
    assert status == 2 and "no switch 's9'" in err
    status, _, err = run(["--topo", "leafspine:3x2x1", "--down", "s1-s2"], capsys)
    assert status == 2 and "no link between s1 and s2" in err
    status, _, err = run(["--topo", "bogus:1"], capsys)
    assert status == 2 and "'bogus:1'" in err
