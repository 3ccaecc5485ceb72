"""Drawing a topology to PNG and the `draw` command."""
import argparse
import os
import struct

import pytest

pytest.importorskip("matplotlib")

from cli import draw as draw_cmd
from topologies import draw
from topologies.spec import topology_from_spec

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "topologies", "examples")


def png_size(path):
    with open(path, "rb") as stream:
        head = stream.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def parse(argv):
    parser = argparse.ArgumentParser()
    draw_cmd.add_arguments(parser)
    return parser.parse_args(argv)


def test_layout_rows_by_tier():
    topo = topology_from_spec("fattree:4")
    positions = draw.layout(topo)
    assert {positions[h.name][1] for h in topo.hosts} == {0.0}
    for switch in topo.switches:
        assert positions[switch.name][1] == switch.tier + 1
    assert len(set(positions.values())) == len(positions), "no two nodes on one spot"


def test_layout_groups_planes_within_a_row():
    topo = topology_from_spec("multiplane:2x2x2x1")
    positions = draw.layout(topo)
    leaves = sorted((s for s in topo.switches if s.tier == 0), key=lambda s: positions[s.name][0])
    assert [s.plane for s in leaves] == [0, 0, 1, 1]


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["dumbbell:2", "leafspine:4x2x2", "fattree:4", "multiplane:2x2x2x2",
                                  os.path.join(EXAMPLES, "triangle.yaml")])
def test_draw_command_writes_a_png(spec, tmp_path, capsys):
    out = tmp_path / "t.png"
    assert draw_cmd.run(parse(["--topo", spec, "-o", str(out), "--ports", "--dpi", "60"])) == 0
    width, height = png_size(out)
    assert width > 200 and height > 200
    assert str(out) in capsys.readouterr().out


@pytest.mark.slow
def test_wider_topologies_give_wider_pictures(tmp_path):
    small, large = tmp_path / "s.png", tmp_path / "l.png"
    draw.draw(topology_from_spec("leafspine:2x1x2"), str(small), dpi=50)
    draw.draw(topology_from_spec("leafspine:8x2x3"), str(large), dpi=50)
    assert png_size(large)[0] > png_size(small)[0]


def test_draw_command_errors(tmp_path, capsys):
    assert draw_cmd.run(parse(["--topo", "ring:3", "-o", str(tmp_path / "x.png")])) == 2
    assert "ring:3" in capsys.readouterr().err
    assert draw_cmd.run(parse(["--topo", "dumbbell:1", "-o", str(tmp_path / "no" / "x.png")])) == 2
    assert "cannot write" in capsys.readouterr().err
