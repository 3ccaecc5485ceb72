"""The conformance case files as p4lang PTF tests, against a running simple_switch_grpc.

One PTF test class per case (named after the case). Each test resets the switch's pipeline over
P4Runtime, installs the case's entries, sends its frames through PTF's dataplane, collects what comes
out on every port and checks it with the suite's own checker (conformance.runner), so a case means
the same here as under `mrc-testbed conformance`. Cases that build a standing queue (`preload`) need
BMv2's thrift queue controls and are skipped here; `mrc-testbed conformance --target bmv2` runs them.

Test parameters (ptf --test-params): grpc_addr (P4Runtime address, e.g. "unix:/tmp/x/p4rt.sock"),
p4info and bmv2_json (default: p4/build/), cases (folder of case files, default conformance/cases).
`python -m conformance.ptf_bench` sets up the veths and the switch and runs ptf with all of them.
"""
from __future__ import annotations

import time
import unittest
from pathlib import Path

import ptf
import ptf.testutils as testutils
from ptf.base_tests import BaseTest

from conformance.case import CASES_DIR, load_cases
from conformance.process_targets import DEFAULT_BMV2_JSON, RX_WINDOW, RX_TIMEOUT
from conformance.runner import Output, execute_case
from pipeline_contract.p4info import load_p4info

QUIET = 0.3        # seconds without a frame after which a case is finished
LINGER = 0.1       # seconds to wait for extra frames once the expected number came out


class PtfTarget:
    """A conformance target made of PTF's dataplane (frames) and the controller's P4Runtime client."""

    name = "ptf-bmv2"

    def __init__(self, test: BaseTest, client, p4info, device_config: bytes):
        self.test, self.client, self.p4info, self.device_config = test, client, p4info, device_config
        self.injected: dict[int, int] = {}

    def reset(self, seed: int, queues=(), hold_port=None) -> None:
        """A fresh pipeline (tables and counters) over P4Runtime; cases with queue settings are skipped."""
        if hold_port is not None or queues:
            raise unittest.SkipTest("needs a standing queue (BMv2 thrift); run it with "
                                    "mrc-testbed conformance --target bmv2")
        self.client.set_pipeline(self.p4info, self.device_config)
        self.injected = {}
        self.test.dataplane.flush()

    def install(self, entries) -> None:
        """INSERT the entries."""
        self.client.insert(entries)

    def preload(self, port, in_port, frames) -> None:
        """Not offered (reset skips such cases)."""
        raise unittest.SkipTest("preload")

    def send(self, in_port: int, frame: bytes) -> None:
        """One frame in through PTF; at most RX_WINDOW frames of a port ahead of MrcIngress.rx (BMv2 reads
        its ports through a small capture ring, see conformance/process_targets.py)."""
        sent = self.injected.get(in_port, 0)
        if sent >= RX_WINDOW:
            self._wait_counted(in_port, sent - RX_WINDOW // 2)
        testutils.send_packet(self.test, in_port, frame)
        self.injected[in_port] = sent + 1

    def _wait_counted(self, port: int, frames: int) -> None:
        deadline = time.monotonic() + RX_TIMEOUT
        while True:
            cell = self.client.read_counter("MrcIngress.rx", port).get(port)
            if (cell.packets if cell else 0) >= frames:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"MrcIngress.rx[{port}] never reached {frames}: frames lost before the pipeline")
            time.sleep(0.001)

    def finish(self, expected=None) -> list[Output]:
        """Every frame that comes out on any port until the expected number came out or QUIET passed."""
        for port, sent in self.injected.items():
            self._wait_counted(port, sent)
        outputs: list[Output] = []
        linger_until = None
        while True:
            timeout = LINGER if linger_until else QUIET
            result = testutils.dp_poll(self.test, device_number=0, timeout=timeout)
            if not isinstance(result, self.test.dataplane.PollSuccess):
                break
            outputs.append(Output(result.port, bytes(result.packet), None))
            if expected is not None and len(outputs) >= expected and linger_until is None:
                linger_until = time.monotonic() + LINGER
            if linger_until and time.monotonic() > linger_until:
                break
        return outputs

    def counter_offsets(self) -> dict:
        """Nothing beyond the case's own packets."""
        return {}

    def read_counters(self, names):
        """Non-zero cells of the named counters."""
        out = {}
        for name in names:
            cells = self.client.read_counter(name)
            out[name] = {i: (v.packets, v.bytes) for i, v in cells.items() if v.packets or v.bytes}
        return out


class ConformanceCaseTest(BaseTest):
    """Runs the case named by the class attribute `case_name`."""

    case_name = ""

    def setUp(self):
        BaseTest.setUp(self)
        from pipeline_contract.client import P4RuntimeClient
        params = testutils.test_params_get()
        if "grpc_addr" not in params:
            self.fail("test parameter grpc_addr (the switch's P4Runtime address) is missing")
        self.dataplane = ptf.dataplane_instance
        self.client = P4RuntimeClient(params["grpc_addr"], device_id=int(params.get("device_id", 1)),
                                      name="ptf", timeout=10).connect()
        p4info = load_p4info(params.get("p4info"))
        config = Path(params.get("bmv2_json") or DEFAULT_BMV2_JSON).read_bytes()
        self.target = PtfTarget(self, self.client, p4info, config)
        cases = {c.name: c for c in load_cases(Path(params.get("cases") or CASES_DIR))}
        self.case = cases[self.case_name]

    def tearDown(self):
        self.client.close()
        BaseTest.tearDown(self)

    def runTest(self):
        run = execute_case(self.case, self.target)
        if run.result.status == "error" and "SkipTest" in run.result.message:
            raise unittest.SkipTest(run.result.message)
        self.assertEqual(run.result.status, "pass", run.result.message)


def _define_tests() -> None:
    """One ConformanceCaseTest subclass per case of the `cases` folder (test parameter; default
    conformance/cases/), named after the case. PTF sets the test parameters before it loads modules."""
    for case in load_cases(Path(testutils.test_param_get("cases") or CASES_DIR)):
        globals()[case.name] = type(case.name, (ConformanceCaseTest,), {"case_name": case.name,
                                                                        "__doc__": case.about})


_define_tests()
