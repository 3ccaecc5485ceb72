"""The labs shipped in this folder: their number, title, duration and what each needs."""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Literal, Optional

from pydantic import Field

from wire.schema import Schema, SchemaError, UnreadableDocument, check, read_document

LABS_DIR = Path(__file__).resolve().parent
FOLDER_NAME = re.compile(r"^(\d{2})-([a-z0-9-]+)$")
NEEDS = ("root", "bmv2", "p4c")
TIME_LIMIT_S = 120            # a student folder's checks, all together, when lab.yaml sets no time_limit_s
MEMORY_MB = 2048              # address space of the process checking one folder (lab.yaml: memory_mb, 0: none)
# what is missing -> how to get it
NEED_PROGRAMS = {"bmv2": "simple_switch_grpc", "p4c": "p4c"}
HOW_TO_GET = {
    "root": "run it with sudo (Mininet creates namespaces and veths)",
    "bmv2": "use the VM (vagrant up), where BMv2 is installed, or build p4lang/behavioral-model "
            "with --with-pi and put simple_switch_grpc on PATH",
    "p4c": "use the VM (vagrant up), where p4c is installed, or install p4lang's p4c package",
}


class LabError(ValueError):
    """A lab that does not exist or whose folder is malformed; the message names it."""


class LabFile(Schema):
    """The keys of a lab's `lab.yaml`."""

    title: str
    minutes: int = Field(gt=0, description="how long the lab takes a student, in minutes")
    summary: str
    needs: list[Literal[NEEDS]] = Field(default_factory=list,
                                        description="what the machine must have: root, bmv2, p4c")
    time_limit_s: Optional[float] = Field(None, gt=0, description=f"a work folder's checks, all "
                                          f"together (default {TIME_LIMIT_S})")
    memory_mb: Optional[int] = Field(None, ge=0, description=f"address space of the process checking "
                                     f"one folder; 0: no limit (default {MEMORY_MB})")
    spawns_programs: bool = Field(False, description="the checks run programs (p4c, BMv2)")


@dataclass(frozen=True)
class Lab:
    """One exercise folder."""

    number: int
    slug: str
    title: str
    minutes: int
    summary: str
    folder: Path
    needs: tuple[str, ...] = field(default=())
    time_limit_s: float = TIME_LIMIT_S       # for all the checks of one work folder
    memory_mb: int = MEMORY_MB               # address space of the process checking one folder
    spawns_programs: bool = False            # the checks run programs (p4c, BMv2): the grader allows processes

    @property
    def skeleton(self) -> Path:
        return self.folder / "skeleton"

    @property
    def solution(self) -> Path:
        return self.folder / "solution"

    def missing(self) -> list[str]:
        """What this machine lacks of the lab's needs, each with how to get it."""
        import os
        out = []
        for need in self.needs:
            if need == "root" and os.geteuid() != 0:
                out.append(f"root: {HOW_TO_GET['root']}")
            elif need in NEED_PROGRAMS and shutil.which(NEED_PROGRAMS[need]) is None:
                out.append(f"{need} ({NEED_PROGRAMS[need]} not on PATH): {HOW_TO_GET[need]}")
        return out

    def check_module(self) -> ModuleType:
        """The lab's check.py, freshly loaded (its runs are kept in it)."""
        return _load_module(self.folder / "check.py", f"labs_check_{self.number:02d}")

    def checks(self) -> list:
        """The lab's checks (`CHECKS` of its check.py)."""
        module = self.check_module()
        checks = getattr(module, "CHECKS", None)
        if not checks:
            raise LabError(f"{self.folder / 'check.py'}: defines no CHECKS")
        return list(checks)


def _load_module(path: Path, name: str) -> ModuleType:
    if not path.is_file():
        raise LabError(f"{path}: missing")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module                   # while it runs (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)              # not importable by name from a student's code
    return module


def read_lab(folder: Path) -> Lab:
    """The lab of one folder `NN-slug/` (its lab.yaml); LabError naming what is wrong."""
    folder = Path(folder)
    match = FOLDER_NAME.match(folder.name)
    if match is None:
        raise LabError(f"{folder}: a lab's folder is named NN-slug (e.g. 03-selective-repeat)")
    meta_path = folder / "lab.yaml"
    try:
        meta = read_document(meta_path)
    except UnreadableDocument as error:
        raise LabError(str(error)) from None
    if not isinstance(meta, dict):
        raise LabError(f"{meta_path}: expected a mapping of title, minutes, needs, summary")
    try:
        keys = check(LabFile, meta)
    except SchemaError as error:
        raise LabError(f"{meta_path}: {error}") from None
    limits = {key: value for key, value in (("time_limit_s", keys.time_limit_s), ("memory_mb", keys.memory_mb))
              if value is not None}
    return Lab(number=int(match.group(1)), slug=match.group(2), title=keys.title, minutes=keys.minutes,
               summary=keys.summary.strip(), folder=folder, needs=tuple(keys.needs),
               spawns_programs=keys.spawns_programs, **limits)


def all_labs(root: Path = LABS_DIR) -> list[Lab]:
    """Every lab folder under `root`, by number."""
    return sorted((read_lab(p) for p in root.iterdir() if p.is_dir() and FOLDER_NAME.match(p.name)),
                  key=lambda lab: lab.number)


def get_lab(number: int, root: Path = LABS_DIR) -> Lab:
    """The lab numbered `number`; LabError naming the labs there are otherwise."""
    labs = all_labs(root)
    for lab in labs:
        if lab.number == number:
            return lab
    raise LabError(f"no lab {number}: the labs are {', '.join(str(l.number) for l in labs) or 'none'}")
