"""Packet captures of the switch ports: how much of each packet tcpdump keeps, and the options
`--pcap` / `--pcap-snaplen N` that `mrc-testbed up` and `mrc-testbed run` share.

A capture writes `<run dir>/<switch>-port<N>.pcap` per switch port, or into the capture's own
`folder` when it has one (`mrc-testbed run --pcap --out DIR`: DIR/pcap/<case>/, see `case_folder`).
Whole packets are kept by default, so Wireshark (with wireshark/mrc.lua) decodes every data packet
to its ICRC; a snapshot length keeps only the first N bytes of each (102 bytes hold every MRC header).
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

MAX_SNAPLEN = 262144            # tcpdump's largest (and default) snapshot length


@dataclass(frozen=True)
class PcapCapture:
    """Capture every switch port; keep `snaplen` bytes of each packet (0: whole packets); write the
    files into `folder` (None: the network's run folder)."""

    snaplen: int = 0
    folder: Path | None = None

    def __post_init__(self) -> None:
        if isinstance(self.snaplen, bool) or not isinstance(self.snaplen, int) \
                or not 0 <= self.snaplen <= MAX_SNAPLEN:
            raise ValueError(f"pcap snapshot length {self.snaplen!r}: expected bytes per packet, "
                             f"1..{MAX_SNAPLEN} (0 or none: whole packets)")

    @classmethod
    def of(cls, pcap: "bool | PcapCapture | None") -> "PcapCapture | None":
        """The capture asked for by `pcap`: True for whole packets, False/None for none."""
        if isinstance(pcap, PcapCapture) or pcap is None:
            return pcap
        if isinstance(pcap, bool):
            return cls() if pcap else None
        raise TypeError(f"pcap={pcap!r}: expected True/False or a PcapCapture")

    def into(self, folder: str | Path) -> "PcapCapture":
        """The same capture, writing its files into `folder` (made absolute: tcpdump runs elsewhere)."""
        return dataclasses.replace(self, folder=Path(folder).resolve())

    def case_folder(self, case_label: str, repetition: int = 0) -> "PcapCapture":
        """The capture of one case of a run that captures into `folder`: its own subfolder, named
        after the case (and its repetition, after the first), e.g. `leaf-spine-mrc`, `leaf-spine-mrc-run2`."""
        if self.folder is None:
            return self
        name = re.sub(r"[^a-z0-9]+", "-", case_label.lower()).strip("-") or "case"
        return self.into(self.folder / (name if repetition == 0 else f"{name}-run{repetition + 1}"))

    def files_folder(self, run_dir: str | Path) -> Path:
        """Where the pcap files of a network whose run folder is `run_dir` go."""
        return Path(run_dir) if self.folder is None else self.folder

    def tcpdump_args(self) -> list[str]:
        """tcpdump's snapshot-length option for this capture (`-s 0` keeps whole packets)."""
        return ["-s", str(self.snaplen)]


def add_pcap_arguments(parser: argparse.ArgumentParser) -> None:
    """--pcap and --pcap-snaplen."""
    parser.add_argument("--pcap", action="store_true",
                        help="capture every switch port to <run dir>/<switch>-port<N>.pcap, whole packets "
                             "(decode them with wireshark/mrc.lua)")
    parser.add_argument("--pcap-snaplen", type=int, metavar="BYTES", default=None,
                        help="capture as --pcap does, keeping only the first BYTES bytes of each packet "
                             "(102 hold every MRC header)")


def capture_from_args(args: argparse.Namespace) -> PcapCapture | None:
    """The capture the parsed options ask for, or None (raises ValueError for a bad length)."""
    snaplen = getattr(args, "pcap_snaplen", None)
    if snaplen is not None:
        if snaplen < 1:
            raise ValueError(f"--pcap-snaplen {snaplen}: expected a number of bytes >= 1")
        return PcapCapture(snaplen)
    return PcapCapture() if getattr(args, "pcap", False) else None
