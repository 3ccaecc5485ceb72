"""Reading htsim_uec's output: the golden file tests/data/htsim/real-gray-spine-seed1.out was
captured from a real htsim_uec run (its header says which build and command)."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments.backends.htsim import HtsimOutputError, parse_output

REAL = Path(__file__).resolve().parents[1] / "data" / "htsim" / "real-gray-spine-seed1.out"


def test_a_real_run_gives_every_flow_its_completion_and_the_totals():
    result = parse_output(REAL.read_text())
    assert sorted(result.finish_us) == list(range(1, 17))
    assert result.finish_us[1] == pytest.approx(250.019)
    assert result.finish_us[7] == pytest.approx(232.128)
    assert max(result.finish_us.values()) == pytest.approx(259.604)
    assert result.names[1] == "Uec_0_10"
    assert result.totals == {"new": 8192, "rtx": 273, "rts": 0, "bounced": 0, "acks": 2878, "nacks": 273, "pulls": 0}


def test_a_real_run_says_the_switch_settings_it_used_in_packets():
    result = parse_output(REAL.read_text())
    assert result.packet_bytes == 4160
    assert result.switch_settings() == {"queue_depth": 48, "trim_threshold": 48, "ecn_threshold": 24,
                                        "ecn_max_threshold": 48}


def test_output_cut_before_its_totals_is_an_error_quoting_its_end():
    text = REAL.read_text()
    cut = text[:text.index("New: ")]
    with pytest.raises(HtsimOutputError, match="no totals line.*did not end normally"):
        parse_output(cut)
    with pytest.raises(HtsimOutputError, match="no output"):
        parse_output("")


def test_a_flow_finishing_twice_is_an_error():
    line = next(line for line in REAL.read_text().splitlines() if " finished at " in line)
    with pytest.raises(HtsimOutputError, match="finished twice"):
        parse_output(f"{line}\n{line}\nNew: 1 Rtx: 0 RTS: 0 Bounced: 0 ACKs: 1 NACKs: 0 Pulls: 0\n")


def test_settings_are_an_error_when_the_output_lacks_them():
    with pytest.raises(HtsimOutputError, match="queue size, ECN ramp and packet size"):
        parse_output("New: 1 Rtx: 0 RTS: 0 Bounced: 0 ACKs: 1 NACKs: 0 Pulls: 0\n").switch_settings()
