"""The case files under p4lang's PTF: the module defines one test per case, the bench's ptf command
maps the ports and passes the switch's address, and the cases pass under ptf against BMv2."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance import ptf_bench
from conformance.case import load_cases

ptf = pytest.importorskip("ptf", reason="ptf is not installed (test extras)")


def test_the_module_defines_one_ptf_test_per_case():
    import sys
    sys.path.insert(0, str(ptf_bench.TEST_DIR))
    try:
        import mrc_cases
    finally:
        sys.path.remove(str(ptf_bench.TEST_DIR))
    names = [c.name for c in load_cases()]
    for name in names:
        cls = getattr(mrc_cases, name)
        assert issubclass(cls, mrc_cases.ConformanceCaseTest) and cls.case_name == name


def test_ptf_command_maps_every_port_and_passes_the_switch_socket():
    target = SimpleNamespace(tmp="/tmp/mrc-conf-x", bmv2_json=Path("/x/mrc.json"),
                             lab=SimpleNamespace(host_if=lambda n: f"xh{n}"))
    argv = ptf_bench.ptf_command(target, Path("/cases"), ["trim_a", "ecn_b"], ["--verbose"])
    assert argv[0].endswith("/ptf")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--interface"] == [f"{n}@xh{n}" for n in range(1, 9)]
    params = argv[argv.index("--test-params") + 1]
    assert "grpc_addr='unix:/tmp/mrc-conf-x/p4rt.sock'" in params and "cases='/cases'" in params
    assert argv[argv.index("--qlen") + 1] == str(ptf_bench.QLEN)
    assert argv[-3:] == ["--verbose", "mrc_cases.trim_a", "mrc_cases.ecn_b"]


@pytest.mark.requires_root
@pytest.mark.requires_bmv2
@pytest.mark.integration
def test_cases_pass_under_ptf_on_bmv2(capfd):
    assert ptf_bench.main(["-k", "usid"]) == 0
    out = capfd.readouterr()
    assert "mrc_cases.usid_t0_first_hop ... ok" in out.err + out.out


@pytest.mark.requires_root
@pytest.mark.requires_bmv2
@pytest.mark.integration
def test_a_broken_case_fails_under_ptf_on_bmv2(capfd):
    broken = Path(__file__).resolve().parents[1] / "data" / "conformance"
    assert ptf_bench.main(["--cases", str(broken), "-k", "wrong_port"]) != 0
    out = capfd.readouterr()
    assert "port 3: 0 packets out, expected 1" in out.err + out.out
