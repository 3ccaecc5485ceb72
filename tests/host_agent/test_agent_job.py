"""Job files: a valid job parses; every kind of mistake names the file and the field."""
from __future__ import annotations

import copy
import json

import pytest

from host_agent.eventlog import LogWriter, read_log
from host_agent.job import JobError, load_job, parse_job


def valid_job(rank: int = 0, world: int = 2, workload: dict | None = None) -> dict:
    peers = []
    for r in range(world):
        if r == rank:
            continue
        peers.append({"rank": r, "qp": 0x100 + r, "remote_qp": 0x200 + rank,
                      "nics": [{"plane": 0, "mac": f"02:00:00:00:10:{r:02x}", "address": f"fc00:0:{0x1000 + r:x}::"}],
                      "paths": {"0": [f"fc00:0:100:{0x1000 + r:x}::", f"fc00:0:101:{0x1000 + r:x}::"]}})
    return {"rank": rank, "world_size": world, "host": f"h{rank}",
            "nics": [{"name": f"h{rank}-eth0", "mac": f"02:00:00:00:10:{rank:02x}",
                      "address": f"fc00:0:{0x1000 + rank:x}::", "plane": 0}],
            "peers": peers, "transport": {"mode": "mrc", "config": {"num_evs": 32, "qp_timeout": 10}},
            "workload": workload or {"kind": "allreduce", "elements": 1000, "dtype": "float32"},
            "timeout": 5}


def test_valid_job_parses_with_defaults_and_round_trips():
    job = parse_job(valid_job(), "j.json")
    assert job.rank == 0 and job.world_size == 2 and job.mode == "mrc"
    assert job.workload.params == {"elements": 1000, "dtype": "float32", "chunk_bytes": 65536, "seed": 0}
    assert job.transport_config().num_evs == 32
    assert job.peer(1).paths[0] == ("fc00:0:100:1001::", "fc00:0:101:1001::")
    assert job.nics[0].mac_bytes == bytes.fromhex("020000001000")
    assert job.goodput_interval == 0.01 and job.timeout == 5.0
    assert parse_job(json.loads(json.dumps(job.to_dict())), "again") == job


def test_load_job_reports_unreadable_and_invalid_json(tmp_path):
    with pytest.raises(JobError, match="cannot read"):
        load_job(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"rank": 0,\n  oops}')
    with pytest.raises(JobError, match=r"bad.json: line 2"):
        load_job(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_job()))
    assert load_job(good).host == "h0"


def _mutate(path: str, value):
    job = copy.deepcopy(valid_job(world=4))
    target = job
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is KeyError:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return job


BAD = [
    ("rank", 9, "rank: 9 is outside 0..3"),
    ("rank", KeyError, "rank: missing"),
    ("world_size", "4", "world_size: expected an integer, got str '4'"),
    ("nics.0.mac", "02:00:00", "nics[0].mac: '02:00:00' is not a MAC"),
    ("nics.0.address", "10.0.0.1", "nics[0].address: '10.0.0.1' is not an IPv6"),
    ("nics.0.name", "this-name-is-far-too-long", "nics[0].name"),
    ("nics.0.speed", 100, "nics[0].speed: unknown field; expected one of address, mac, name, plane"),
    ("peers.1.rank", 0, "peers[1].rank: 0 is this agent's own rank"),
    ("peers.1.rank", 1, "peers[1].rank: rank 1 is listed twice"),
    ("peers.0.qp", 1 << 24, "peers[0].qp"),
    ("peers.0.nics.0.mac", "zz:00:00:00:00:00", "peers[0].nics[0].mac"),
    ("peers.0.paths", {"0": ["fc00::", "nonsense"]}, "peers[0].paths[0][1]: 'nonsense'"),
    ("peers.0.paths", {"3": ["fc00::"]}, "peers[0].paths[3]: this agent has no NIC on plane 3"),
    ("peers.0.paths", {}, "peers[0].paths: MRC mode needs at least one path"),
    ("transport.mode", "tcp", "transport.mode: 'tcp' is not one of"),
    ("transport.config.num_evs", 4, "transport.config.num_evs: 4 is outside 16..256"),
    ("transport.config.num_evz", 4, "transport.config.num_evz: not a transport parameter; known: "),
    ("transport.config.qp_timeout", "fast", "transport.config.qp_timeout: expected a number, got str 'fast'"),
    ("workload.kind", "broadcast", "workload.kind: 'broadcast' is not one of"),
    ("workload.elements", 0, "workload.elements: 0 must be positive"),
    ("workload.elements", KeyError, "workload.elements: missing"),
    ("workload.dtype", "float16", "workload.dtype: 'float16'"),
    ("workload.chunk", 5, "workload.chunk: unknown field; expected one of chunk_bytes, dtype, elements, kind, seed"),
    ("timeout", -1, "timeout: -1 must be positive"),
    ("peers", [], "peers: the allreduce workload needs a peer of rank 1"),
    ("workload", {"kind": "transfer", "src": 0, "dst": 0, "bytes": 10}, "workload.dst: same rank as src"),
    ("workload", {"kind": "transfer", "src": 0, "dst": 7, "bytes": 10}, "workload.dst: 7 is outside"),
    ("extra", 1, "extra: unknown field; expected one of goodput_interval, host, log, nics,"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}={v!r}" for p, v, _ in BAD])
def test_bad_field_is_named(path, value, message):
    with pytest.raises(JobError) as err:
        parse_job(_mutate(path, value), "job3.json")
    assert str(err.value).startswith("job3.json: ")
    assert message in str(err.value)


def test_baseline_mode_needs_no_paths():
    job = valid_job()
    job["transport"] = {"mode": "roce"}
    job["peers"][0]["paths"] = {}
    assert parse_job(job).mode == "roce"


def test_alltoall_needs_every_peer_but_transfer_only_its_partner():
    job = valid_job(world=3, workload={"kind": "alltoall", "block_bytes": 100})
    del job["peers"][1]
    with pytest.raises(JobError, match="needs a peer of rank 2"):
        parse_job(job)
    job["workload"] = {"kind": "transfer", "src": 1, "dst": 0, "bytes": 100}
    assert parse_job(job).workload.params["src"] == 1


def test_event_log_writes_json_lines(tmp_path):
    path = tmp_path / "ev.jsonl"
    log = LogWriter.open(str(path))
    log.write(1.5, "start", rank=0, addr=b"\x01\x02", nan=float("nan"), planes={3})
    log.write(2.0, "stop", reason="finished", status=0)
    log.close()
    records = read_log(str(path))
    assert records == [{"t": 1.5, "kind": "start", "rank": 0, "addr": "0102", "nan": None, "planes": [3]},
                       {"t": 2.0, "kind": "stop", "reason": "finished", "status": 0}]


def test_agent_is_a_mrc_testbed_command():
    from cli.main import COMMANDS, load_command
    command = next(c for c in COMMANDS if c.name == "agent")
    module = load_command(command)
    import argparse
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(["--job", "j.json", "--timeout", "3"])
    assert args.job == "j.json" and args.timeout == 3.0 and args.log is None


def test_agent_check_validates_without_running(tmp_path):
    import subprocess
    import sys
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_job()))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_mutate("peers.0.qp", -1)))
    ok = subprocess.run([sys.executable, "-m", "host_agent.agent", "--job", str(good), "--check"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "valid job for rank 0 of 2" in ok.stdout
    no = subprocess.run([sys.executable, "-m", "host_agent.agent", "--job", str(bad), "--check"],
                        capture_output=True, text=True, timeout=60)
    assert no.returncode == 2 and "peers[0].qp: -1 is not a 24-bit QP number" in no.stderr


def test_a_registered_transport_is_a_valid_mode_of_a_job_file():
    from host_agent.transport import kinds
    job = valid_job()
    job["transport"] = {"mode": "job-test-kind"}
    with pytest.raises(JobError, match="transport.mode: 'job-test-kind' is not one of mrc, roce"):
        parse_job(job)
    kinds.register_transport("job-test-kind", kinds.builder("mrc"))
    try:
        assert parse_job(job).mode == "job-test-kind"
    finally:
        del kinds.TRANSPORTS["job-test-kind"]


def test_start_file_is_optional_and_a_non_empty_path():
    assert parse_job(valid_job(), "j.json").start_file is None
    job = parse_job({**valid_job(), "start_file": "/tmp/run/start_at"}, "j.json")
    assert job.start_file == "/tmp/run/start_at"
    assert parse_job(json.loads(json.dumps(job.to_dict())), "again") == job
    for bad in ("", 3):
        with pytest.raises(JobError, match="j.json: start_file: expected text"):
            parse_job({**valid_job(), "start_file": bad}, "j.json")
    from host_agent.job import Job
    assert "start record" in Job.model_json_schema()["properties"]["start_file"]["description"]
