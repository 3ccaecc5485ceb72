"""Field-by-field differences of two frames, decoded with the Scapy layers of wire.headers."""
from __future__ import annotations

from typing import Optional

from conformance.packets import dissect


def _layers(frame: bytes) -> list:
    out = []
    layer = dissect(frame)
    while layer is not None and layer.__class__.__name__ != "NoPayload":
        out.append(layer)
        layer = layer.payload if layer.payload else None
    return out


def _value(layer, name: str):
    try:
        return layer.getfieldval(name)
    except AttributeError:
        return None


def field_diff(expected: bytes, actual: bytes) -> list[str]:
    """`Layer.field: expected -> actual` for every field that differs (raw payloads by length and
    first differing byte); empty when the frames are equal."""
    if expected == actual:
        return []
    lines = []
    if len(expected) != len(actual):
        lines.append(f"length: {len(expected)} -> {len(actual)}")
    want, got = _layers(expected), _layers(actual)
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else None
        g = got[i] if i < len(got) else None
        if w is None or g is None or type(w) is not type(g):
            lines.append(f"layer {i}: {_name(w)} -> {_name(g)}")
            break
        if w.name in ("Raw", "Padding"):
            a, b = bytes(w.load), bytes(g.load)
            if a != b:
                lines.append(f"{_name(w)}: {len(a)} bytes -> {len(b)} bytes, first difference at byte "
                             f"{next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))}")
            continue
        for f in w.fields_desc:
            a, b = _value(w, f.name), _value(g, f.name)
            if a != b:
                lines.append(f"{_name(w)}.{f.name}: {_show(w, f.name, a)} -> {_show(g, f.name, b)}")
    return lines or ["bytes differ outside the decoded fields"]


def _show(layer, name: str, value) -> str:
    text = layer.get_field(name).i2repr(layer, value)
    return text if text not in ("", None) else str(int(value)) if value is not None else "none"


def _name(layer: Optional[object]) -> str:
    return "none" if layer is None else layer.__class__.__name__


def describe(frame: bytes) -> str:
    """One line: Scapy's summary of the frame and its length."""
    return f"{len(frame)} bytes: {dissect(frame).summary()}"
