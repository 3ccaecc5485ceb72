"""Files and messages read against pydantic models: one description of a shape, one style of error.

Every file the testbed reads (scenario, sweep, job, cluster, conformance case) and every control
message is a pydantic model deriving from `Schema`. `check(model, data)` validates and, on the first
problem, raises `SchemaError` with the key path (`faults[2].at`, `peers[0].nics[1].mac`) and what
was expected, in words a reader of the file understands; each file's loader adds its file name.

A model's own checks (one field against another, a value against a registry) raise `invalid(reason,
key)`: `key` names the field of that model the reason is about, so the path still ends at it.

`read_document(path)` reads such a file (YAML, or JSON) before it is checked: one way for every
loader to say that a file is missing, unreadable or not YAML, with the line at fault.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar, Union

import yaml

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic_core import PydanticCustomError

M = TypeVar("M", bound=BaseModel)

_INVALID = "invalid"            # error type of a model's own checks
_UNKNOWN = "unknown_field"      # error type of a key the model does not have


class SchemaError(ValueError):
    """Data that does not fit its model: `path` (dotted, with [i]) names the key, `reason` says why;
    `loc` is the same path as keys and indexes, and `unknown` tells a key that should not be there."""

    def __init__(self, path: str, reason: str, loc: tuple = (), unknown: bool = False) -> None:
        self.path = path
        self.reason = reason
        self.loc = loc
        self.unknown = unknown
        super().__init__(f"{path}: {reason}" if path else reason)


class UnreadableDocument(ValueError):
    """A file that cannot be read or decoded: `path`, `where` in it ("line 3", or "" for the whole
    file) and `reason`. A loader turns it into its own error class, keeping the three."""

    def __init__(self, path: str, where: str, reason: str) -> None:
        self.path = path
        self.where = where
        self.reason = reason
        super().__init__(f"{path}: {where}: {reason}" if where else f"{path}: {reason}")


def read_document(path: Union[str, Path], json_format: bool = False) -> Any:
    """The YAML document (with `json_format`, the JSON document) in the file at `path`, as plain
    values; UnreadableDocument when the file cannot be read or is not valid YAML (JSON)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UnreadableDocument(name, "", f"cannot read the file ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise UnreadableDocument(name, "", f"not UTF-8 text (byte {error.start})") from None
    if json_format:
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise UnreadableDocument(name, f"line {error.lineno}", f"not valid JSON: {error.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        what = getattr(error, "problem", None) or getattr(error, "context", None) or str(error)
        raise UnreadableDocument(name, f"line {mark.line + 1}" if mark is not None else "",
                                 f"not valid YAML: {what}") from None


class Schema(BaseModel):
    """A strict, closed model: no coercion (`"4"` is not 4), no unknown keys, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False,
                              populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or name for name, f in cls.model_fields.items()]
            for key in data:
                if key not in known:
                    raise PydanticCustomError(_UNKNOWN, "{reason}", {
                        "reason": f"unknown field; expected one of {', '.join(sorted(known))}", "key": str(key)})
        return data


def optional_fields(model: type[Schema], name: str, exclude: tuple = ()) -> type[Schema]:
    """A model named `name` with the fields of `model` (less `exclude`), each optional (None when
    not given) with its type and bounds: a partial written over the whole later (overrides)."""
    fields = {}
    for key, info in model.model_fields.items():
        if key in exclude:
            continue
        annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        fields[key] = (Optional[annotation], Field(None, description=info.description))
    return create_model(name, __base__=Schema, __doc__=f"{model.__name__} keys, each optional.", **fields)


def invalid(reason: str, key: Optional[str] = None) -> PydanticCustomError:
    """The error a model's own check raises: `reason`, about its field `key` (None: the model itself)."""
    return PydanticCustomError(_INVALID, "{reason}", {"reason": reason, "key": key})


def check(model: type[M], data: Any) -> M:
    """`data` validated as `model`; SchemaError naming the first key at fault."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise first_problem(error) from None


def first_problem(error: ValidationError) -> SchemaError:
    """The first error of a pydantic ValidationError, as a SchemaError with a key path and a reason."""
    item = error.errors(include_url=False)[0]
    loc = list(item["loc"])
    ctx = item.get("ctx") or {}
    if item["type"] == _UNKNOWN and ctx.get("key") is not None:
        loc.append(ctx["key"])
    elif item["type"] == _INVALID and ctx.get("key") is not None:        # "a.b[2].c" -> a, b, 2, c
        loc += [int(part[1:-1]) if part.startswith("[") else part
                for part in re.findall(r"\[\d+\]|[^.\[\]]+", ctx["key"])]
    if item["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc.append("kind")
    loc = [part for part in loc if not (isinstance(part, str) and part.startswith("<") and part.endswith(">"))]
    return SchemaError(key_path(loc), reason(item), tuple(loc), item["type"] == _UNKNOWN)


def key_path(loc: list) -> str:
    """('faults', 2, 'at') -> 'faults[2].at' (a discriminated union's tag, written '<kind>', is left out)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("<") and part.endswith(">"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


_EXPECTED = {"int": "an integer", "float": "a number", "string": "text", "bool": "true or false",
             "dict": "a mapping (key: value)", "model": "a mapping (key: value)", "list": "a list",
             "tuple": "a list", "literal": None}


def reason(item: dict) -> str:
    """What was expected, for one pydantic error record."""
    kind, ctx, value = item["type"], item.get("ctx") or {}, item.get("input")
    if kind in (_INVALID, _UNKNOWN):
        return ctx["reason"]
    if kind == "missing":
        return "missing"
    if kind == "literal_error":
        return f"{value!r} is not one of {ctx['expected'].replace(' or ', ', ')}"
    if kind == "union_tag_invalid":          # tags are written '<kind>' (see key_path)
        tags = ctx.get("expected_tags", "").replace("'", "").replace("<", "").replace(">", "")
        return f"{ctx.get('tag', '').strip('<>')!r} is not one of {tags}"
    if kind == "union_tag_not_found":
        return "missing"
    if kind == "finite_number":
        return f"{value} is not a finite number"
    if kind == "greater_than":
        return f"{value} must be positive" if ctx["gt"] == 0 else f"{value} must be above {ctx['gt']}"
    if kind == "greater_than_equal":
        return f"{value} is below the minimum {ctx['ge']}"
    if kind == "less_than_equal":
        return f"{value} is above the maximum {ctx['le']}"
    if kind == "less_than":
        return f"{value} must be below {ctx['lt']}"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return (f"expected a non-empty list, got {describe(value)}" if least == 1 else
                f"expected at least {least} items, got {describe(value)}")
    if kind == "too_long":
        return f"expected at most {ctx.get('max_length')} items, got {describe(value)}"
    if kind == "string_pattern_mismatch":
        return f"{value!r} does not match {ctx.get('pattern')}"
    for prefix, words in _EXPECTED.items():
        if kind.startswith(prefix + "_") and words:
            return f"expected {words}, got {describe(value)}"
    message = item.get("msg", kind)
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def describe(value: Any) -> str:
    """A value as an error message shows it: its type and its text, short."""
    if value is None:
        return "nothing"
    if isinstance(value, float) and not math.isfinite(value):
        return f"float {value}"
    return f"{type(value).__name__} {value!r}"[:80]
