"""wire.schema: files read once, checked against a model, every problem named by file, line or key."""
from __future__ import annotations

from typing import Optional

import pytest
from pydantic import Field

from wire.schema import Schema, SchemaError, UnreadableDocument, check, read_document


class NamedCount(Schema):
    name: str
    count: int = Field(gt=0)
    note: Optional[str] = None


def test_a_yaml_and_a_json_file_are_read_as_plain_values(tmp_path):
    (tmp_path / "a.yaml").write_text("name: x\ncount: 2\n")
    (tmp_path / "a.json").write_text('{"name": "x", "count": 2}')
    assert read_document(tmp_path / "a.yaml") == {"name": "x", "count": 2}
    assert read_document(tmp_path / "a.json", json_format=True) == {"name": "x", "count": 2}


@pytest.mark.parametrize("name, text, json_format, message", [
    ("gone.yaml", None, False, r"gone.yaml: cannot read the file \(No such file or directory\)"),
    ("bad.yaml", "name: x\ncount: [2\n", False, r"bad.yaml: line 3: not valid YAML: expected ',' or ']'"),
    ("tab.yaml", "name: x\n\tcount: 2\n", False, r"tab.yaml: line 2: not valid YAML"),
    ("bad.json", '{"name": "x",\n "count": }', True, r"bad.json: line 2: not valid JSON: Expecting value"),
    ("latin.yaml", b"name: \xe9\n", False, r"latin.yaml: not UTF-8 text \(byte 6\)"),
])
def test_an_unreadable_file_names_itself_the_line_and_why(tmp_path, name, text, json_format, message):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(UnreadableDocument, match=message) as caught:
        read_document(path, json_format=json_format)
    assert caught.value.path == str(path)


def test_check_names_the_key_at_fault_and_refuses_coercion_and_unknown_keys():
    assert check(NamedCount, {"name": "x", "count": 3}).count == 3
    for data, path, reason in [({"name": "x", "count": "3"}, "count", "expected an integer, got str '3'"),
                               ({"name": "x", "count": 0}, "count", "0 must be positive"),
                               ({"name": "x"}, "count", "missing"),
                               ({"name": "x", "count": 1, "cuont": 1}, "cuont", "unknown field")]:
        with pytest.raises(SchemaError) as caught:
            check(NamedCount, data)
        assert caught.value.path == path and caught.value.reason.startswith(reason)
