"""The helper processes (testbed.prober, testbed.loadgen) speak the one control protocol (wire.control)
on their stdin/stdout: a `ready` event, typed requests, responses and refusals naming the field."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from wire.control import read_message, write_message

ROOT = Path(__file__).resolve().parents[2]


def start(module: str, spec: dict, tmp_path: Path) -> subprocess.Popen:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, "-m", module, str(path)], cwd=str(ROOT), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_prober_answers_sends_refuses_bad_requests_and_stops(tmp_path):
    probes = tmp_path / "probes.json"
    probes.write_text("[]")
    proc = start("testbed.prober", {"nics": {}}, tmp_path)          # no NIC: no raw socket to open
    try:
        assert read_message(proc.stdout) == {"event": "ready", "data": None}
        write_message(proc.stdin, {"op": "send", "id": 3, "file": str(probes)})
        assert read_message(proc.stdout) == {"id": 3, "ok": True, "result": {"sent": 0}}
        write_message(proc.stdin, {"op": "fly", "id": 4})
        assert read_message(proc.stdout) == {"id": 4, "ok": False, "error": "op: 'fly' is not one of send, stop"}
        write_message(proc.stdin, {"op": "send", "id": 5})
        assert read_message(proc.stdout)["error"] == "file: missing"
        write_message(proc.stdin, {"op": "send", "id": 6, "file": str(tmp_path / "none.json")})
        assert read_message(proc.stdout)["error"].startswith("file: ")
        write_message(proc.stdin, {"op": "stop", "id": 7})
        assert read_message(proc.stdout) == {"id": 7, "ok": True, "result": None}
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_load_generator_with_a_bad_spec_names_the_key_and_does_not_start(tmp_path):
    spec = {"nic": "lo", "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:02", "src": "fc00::1",
            "paths": ["fc00::2"], "rate_pps": -5, "duration_s": 0.1}
    proc = start("testbed.loadgen", spec, tmp_path)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 2 and out == b""
    assert b"spec.json: rate_pps: -5 must be positive" in err
