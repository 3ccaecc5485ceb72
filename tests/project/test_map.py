"""README's architecture section is the one map of the repository: it must stay true.

Every folder, file and module the section names must exist, and every Python package and top-level
folder of the repository must be in its folder table. `docs/design.md` and `docs/transport.md`
describe contracts and point to the map instead of keeping folder tables of their own.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Top-level folders that are not part of the project's own layout (tools' caches, environments).
NOT_MAPPED = {".git", ".venv", ".pytest_cache", ".mypy_cache", "build", "runs", "__pycache__"}


def architecture() -> str:
    """The text of README's "Architecture" section."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^## Architecture\n(.*?)^## ", text, re.S | re.M)
    assert found, "README.md has no '## Architecture' section followed by another section"
    return found.group(1)


def folder_table(section: str) -> list[str]:
    """The folders (without the slash) of the section's `| folder | holds |` table, one per name."""
    names = []
    for row in re.findall(r"^\| (.+?) \|", section, re.M):
        names += [name.rstrip("/") for name in re.findall(r"`([^`]+/)`", row)]
    return names


def named_paths(section: str) -> list[str]:
    """Every path the section writes in backticks (a token with a slash or a file suffix), except
    the placeholders `X` stands for; a bare file name is looked for in the mapped folders."""
    paths = []
    for token in re.findall(r"`([^`\s]+)`", section):
        if "X" in token or token.startswith(("-", "mrc-testbed")):
            continue
        if "/" in token or re.search(r"\.(py|md|p4|lua|yaml)$", token):
            paths.append(token)
    return paths


def test_every_folder_of_the_table_exists():
    missing = [name for name in folder_table(architecture()) if not (ROOT / name).is_dir()]
    assert missing == [], f"README's folder table names folders that do not exist: {missing}"


def tracked_folders() -> set[str]:
    """The top-level folders holding files git tracks (what a clone has: no caches, no venv); the
    folders on disk when this is not a git checkout."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if done.returncode != 0:
        return {p.name for p in ROOT.iterdir()
                if p.is_dir() and p.name not in NOT_MAPPED and not p.name.endswith(".egg-info")}
    return {line.split("/", 1)[0] for line in done.stdout.splitlines() if "/" in line}


def test_every_top_level_folder_is_in_the_table():
    mapped = set(folder_table(architecture()))
    folders = tracked_folders()
    # Hidden folders are mapped by their own names too (.ci/); a stray one fails like any other.
    unmapped = sorted(folders - mapped)
    assert unmapped == [], f"folders missing from README's folder table: {unmapped}"


def test_every_python_package_is_in_the_table():
    mapped = set(folder_table(architecture()))
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert [p for p in packages if p not in mapped] == []


def test_every_path_the_map_names_exists():
    section = architecture()
    missing = []
    for token in named_paths(section):
        candidates = [ROOT / token, *[ROOT / folder / token for folder in folder_table(section)]]
        if not any(c.exists() for c in candidates):
            missing.append(token)
    assert missing == [], f"README's architecture section names paths that do not exist: {missing}"


def test_every_module_the_map_runs_exists():
    modules = re.findall(r"python -m ([\w.]+)", architecture())
    assert modules, "the map names no `python -m` module: the pattern no longer matches README"
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    assert missing == []


def test_docs_point_to_the_map_instead_of_keeping_their_own():
    for doc in ("docs/design.md", "docs/transport.md"):
        text = (ROOT / doc).read_text()
        assert "README.md" in text and "Architecture" in text, f"{doc} does not point to README's map"
        assert not re.search(r"^\| folder \|", text, re.M), f"{doc} keeps a folder table of its own"


def test_the_p4_program_names_where_its_numbers_live():
    for program in [ROOT / "p4" / "mrc.p4", *sorted((ROOT / "labs").glob("*/*/mrc.p4"))]:
        text = program.read_text()
        for named in re.findall(r"\b([\w/]+/[\w]+\.py)\b", text):
            assert (ROOT / named).exists(), f"{program.relative_to(ROOT)} names {named}, which does not exist"


def test_tests_are_grouped_by_the_folder_they_test():
    """`tests/` holds one folder per mapped folder (tests/netsim/ tests netsim/), plus tests/project/
    for checks of the whole repository; no test file sits in tests/ itself."""
    allowed = set(folder_table(architecture())) | {"project"}
    misplaced = []
    for test in sorted((ROOT / "tests").rglob("test_*.py")):
        parts = test.relative_to(ROOT / "tests").parts
        if len(parts) != 2 or parts[0] not in allowed:
            misplaced.append("/".join(parts))
    assert misplaced == [], f"test files outside tests/<mapped folder>/: {misplaced}"


def test_every_test_file_the_docs_name_exists():
    """A document or comment that points a reader to tests/...py points to a file that exists."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    files = done.stdout.split() if done.returncode == 0 else []
    missing = []
    for name in files:
        if name == "CHANGELOG.md" or not name.endswith((".md", ".py", ".p4", ".lua", ".sh", ".yaml")):
            continue
        text = (ROOT / name).read_text(errors="replace")
        for named in re.findall(r"\b(tests/[\w/]+\.py)\b", text):
            if not (ROOT / named).exists():
                missing.append(f"{name}: {named}")
    assert missing == [], f"paths of tests that do not exist: {missing}"
