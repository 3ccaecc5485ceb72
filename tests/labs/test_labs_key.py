"""The answer key of labs/INSTRUCTORS.md cannot go stale: every figure it quotes is computed by a
lab's key.py from the solutions, and the guide quotes what they give (the slow test runs them)."""
from __future__ import annotations

import pytest

from labs import answer_key, catalog

GUIDE = answer_key.GUIDE.read_text(encoding="utf-8")


def test_every_figure_the_guide_quotes_is_computed_by_a_labs_key():
    quoted, declared = set(answer_key.quoted(GUIDE)), answer_key.declared()
    assert quoted - declared == set(), "the guide quotes figures no key.py computes"
    assert {n.split(".")[0] for n in quoted} == {f"lab{lab.number}" for lab in catalog.all_labs()}


def test_no_run_figure_is_left_outside_the_markers_in_the_answer_keys():
    """The figures the issue found stale are all under markers now."""
    for stale in ("1.14", "62 us after the kill", "122 us", "359", "8.7 ms", "320 Mb/s", "428", "49 %"):
        assert stale not in answer_key.MARKER.sub("", GUIDE), stale


def test_fill_replaces_the_values_between_the_markers_only():
    text = "a <!--key:lab9.x-->1<!--/key--> b <!--key:lab9.x-->1<!--/key--> c <!--key:lab9.y-->\n|t|\n<!--/key-->"
    figures = {"lab9.x": "2", "lab9.y": "\n|u|\n"}
    assert answer_key.differences(text, figures) == [("lab9.x", "1", "2"), ("lab9.y", "\n|t|\n", "\n|u|\n")]
    filled = answer_key.fill(text, figures)
    assert filled == "a <!--key:lab9.x-->2<!--/key--> b <!--key:lab9.x-->2<!--/key--> c <!--key:lab9.y-->\n|u|\n<!--/key-->"
    assert answer_key.differences(filled, figures) == []
    with pytest.raises(answer_key.AnswerKeyError, match="lab9.z"):
        answer_key.fill(text + "<!--key:lab9.z-->?<!--/key-->", figures)


@pytest.mark.slow
def test_the_guide_quotes_what_the_solutions_give():
    """About a minute as pure Python: every lab's solution and the wrong answers the guide discusses."""
    stale = answer_key.differences(GUIDE, answer_key.compute())
    assert not stale, "labs/INSTRUCTORS.md is stale, run `mrc-testbed lab key`: " + "; ".join(
        f"{name}: guide {quoted!r}, solutions {now!r}" for name, quoted, now in stale)


def test_lab_key_refuses_a_guide_that_quotes_an_unknown_figure(monkeypatch, tmp_path, capsys):
    from cli import lab as lab_cli
    guide = tmp_path / "INSTRUCTORS.md"
    guide.write_text(GUIDE + "\nand <!--key:lab4.no_such_figure-->3<!--/key-->\n")
    monkeypatch.setattr(answer_key, "GUIDE", guide)
    assert lab_cli.answer_key(check_only=True) == 2
    assert "lab4.no_such_figure" in capsys.readouterr().err
    assert guide.read_text().endswith("<!--key:lab4.no_such_figure-->3<!--/key-->\n")     # left as it was
