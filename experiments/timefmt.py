"""How a time reads wherever results print one (table, summary.md, report, figure labels):
three significant digits in the unit that suits it (whole seconds from 1000 s).

    format_seconds(0.0002803)  -> "280 µs"
    format_seconds(0.0144)     -> "14.4 ms"
    format_seconds(1.8512)     -> "1.85 s"
    format_seconds(1234.4)     -> "1234 s"

Microseconds below 1 ms, milliseconds below 1 s, seconds from there. The value is rounded to
three significant digits before the unit is chosen, so 999.96 µs reads "1 ms", not "1000 µs".
"""
from __future__ import annotations

import math

SIGNIFICANT = 3
_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))


def format_seconds(value: float) -> str:
    """`value` seconds as text: '280 µs', '14.4 ms', '1.85 s' (ns and below read as µs)."""
    if not math.isfinite(value):
        raise ValueError(f"time {value!r}: expected a finite number of seconds")
    if value == 0:
        return "0 s"
    sign, value = ("-" if value < 0 else ""), abs(value)
    rounded = float(f"{value:.{SIGNIFICANT}g}")
    scale, unit = next(((s, u) for s, u in _UNITS if rounded >= s), _UNITS[-1])
    if rounded >= 10 ** SIGNIFICANT:                      # 1234 s: whole seconds
        return f"{sign}{value:.0f} s"
    shown = rounded / scale
    return f"{sign}{float(f'{shown:.{SIGNIFICANT}g}'):g} {unit}"
