"""The answer key of labs/INSTRUCTORS.md, made from the solutions' own runs so that it cannot go stale.

Every figure the guide quotes from a run stands between two markers, `<!--key:lab4.retired_us-->31<!--/key-->`
(invisible when the guide is rendered); a figure may also be a whole generated table. Each lab's
`key.py` has `NAMES` and `figures(lab, scratch) -> {name: text}` (scratch: a temporary folder), computed from the lab's solution (and from the wrong
answers the guide discusses, made from the solution) on netsim, deterministic for a given code.
`mrc-testbed lab key` writes the figures into the guide; `mrc-testbed lab key --check` and the test
suite say which ones the guide quotes wrong.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Callable

from labs import catalog, workspace
from labs.catalog import LABS_DIR, Lab, _load_module

GUIDE = LABS_DIR / "INSTRUCTORS.md"
MARKER = re.compile(r"<!--key:(?P<name>[a-z0-9_.]+)-->(?P<value>.*?)<!--/key-->", re.S)


class AnswerKeyError(LookupError):
    """The guide names a figure no lab's key computes, or quotes one twice with different values."""


def quoted(text: str) -> dict[str, list[str]]:
    """Every figure the guide quotes: name -> the values it quotes (one per place)."""
    out: dict[str, list[str]] = {}
    for m in MARKER.finditer(text):
        out.setdefault(m.group("name"), []).append(m.group("value"))
    return out


def key_module(lab: Lab):
    """The lab's key.py, or None when the lab has none."""
    path = lab.folder / "key.py"
    return _load_module(path, f"labs_key_{lab.number:02d}") if path.is_file() else None


def declared(labs: list[Lab] | None = None) -> set[str]:
    """The names of every figure the labs' keys compute (their NAMES), without running anything."""
    names = set()
    for lab in labs or catalog.all_labs():
        module = key_module(lab)
        if module is not None:
            names.update(f"lab{lab.number}.{n}" for n in module.NAMES)
    return names


def compute(labs: list[Lab] | None = None, progress: Callable[[str], None] | None = None) -> dict[str, str]:
    """Every figure of every lab's key (runs the solutions on netsim: about a minute as pure Python)."""
    figures = {}
    for lab in labs or catalog.all_labs():
        module = key_module(lab)
        if module is None:
            continue
        if progress:
            progress(f"lab {lab.number}: running the solution and the guide's wrong answers")
        with tempfile.TemporaryDirectory(prefix=f"lab{lab.number}-key-") as scratch:
            mine = module.figures(lab, Path(scratch))
        if set(mine) != set(module.NAMES):
            raise AnswerKeyError(f"{lab.folder / 'key.py'}: figures() gave {sorted(set(mine) ^ set(module.NAMES))} "
                            "other than NAMES says")
        figures.update({f"lab{lab.number}.{n}": str(v) for n, v in mine.items()})
    return figures


def differences(text: str, figures: dict[str, str]) -> list[tuple[str, str, str | None]]:
    """(name, what the guide says, what the solutions give) of every figure quoted wrong; None when
    no key computes it."""
    out = []
    for name, values in quoted(text).items():
        now = figures.get(name)
        for value in values:
            if value != now:
                out.append((name, value, now))
                break
    return out


def fill(text: str, figures: dict[str, str]) -> str:
    """The guide with every quoted figure replaced by the solutions' value."""
    unknown = sorted(set(quoted(text)) - set(figures))
    if unknown:
        raise AnswerKeyError(f"{GUIDE.name} quotes figures no lab's key.py computes: {', '.join(unknown)}")
    return MARKER.sub(lambda m: f"<!--key:{m.group('name')}-->{figures[m.group('name')]}<!--/key-->", text)


def variant(lab: Lab, scratch: Path, file: str, replacements: list[tuple[str, str]] = (),
            append: str = "") -> Path:
    """A work folder in `scratch` holding the lab's solution with each (old, new) of `replacements`
    made once and `append` added to `file`: a wrong answer the guide discusses."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    workspace.start(lab, folder)
    for name in (p.name for p in lab.solution.iterdir() if p.is_file()):
        (folder / name).write_text((lab.solution / name).read_text(encoding="utf-8"), encoding="utf-8")
    text = (lab.solution / file).read_text(encoding="utf-8")
    for old, new in replacements:
        if text.count(old) != 1:
            raise ValueError(f"{lab.solution / file}: {old!r} is not there exactly once")
        text = text.replace(old, new)
    (folder / file).write_text(text + append, encoding="utf-8")
    return folder


def override(cls: str, body: str) -> str:
    """Text that replaces class `cls` of a solution file by a subclass with `body` (indented methods)."""
    import textwrap
    return f"\n\nclass _Wrong({cls}):\n{textwrap.indent(textwrap.dedent(body), '    ')}\n\n{cls} = _Wrong\n"
