"""A student's work folder: a copy of a lab's skeleton that remembers which lab it is."""
from __future__ import annotations

import shutil
from pathlib import Path

from labs.catalog import Lab

MARKER = ".mrc-lab"


class WorkspaceError(ValueError):
    """The work folder cannot be made or read; the message names it."""


def default_folder(lab: Lab) -> Path:
    """Where `lab start` puts the work when no --dir is given."""
    return Path.cwd() / f"lab{lab.number}-{lab.slug}"


def start(lab: Lab, folder: Path) -> Path:
    """Copy the lab's skeleton into `folder` (new or empty) and mark it with the lab's number."""
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise WorkspaceError(f"{folder} exists and is not empty: choose another --dir "
                             "(your earlier work is left as it is)")
    shutil.copytree(lab.skeleton, folder, dirs_exist_ok=True)
    (folder / MARKER).write_text(f"{lab.number}\n", encoding="utf-8")
    return folder


def lab_number_of(folder: Path) -> int | None:
    """The lab a work folder was started for, or None when it was not made by `lab start`."""
    marker = Path(folder) / MARKER
    try:
        return int(marker.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
