"""How a size in bytes and a rate in bit/s read wherever results print one (titles, tables,
reports, figure axes): one convention for every place (times: experiments/timefmt.py).

Sizes: binary units, KiB, MiB and GiB (a whole number of quarters of one: "1.5 MiB"); a size that
is a round decimal number and no such binary one reads in decimal units, kB, MB and GB; anything
else in bytes.

    format_bytes(262144)   -> "256 KiB"
    format_bytes(2097152)  -> "2 MiB"
    format_bytes(1572864)  -> "1.5 MiB"
    format_bytes(2000000)  -> "2 MB"
    format_bytes(1500)     -> "1500 B"

Rates: bit/s in the largest of Tbit/s, Gbit/s and Mbit/s the rate reaches (Mbit/s at least),
three significant digits.

    format_rate(5.66e6)    -> "5.66 Mbit/s"
    format_rate(2.92e11)   -> "292 Gbit/s"
    format_rate(1.06e12)   -> "1.06 Tbit/s"
"""
from __future__ import annotations

BINARY_SIZES = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
DECIMAL_SIZES = ((10 ** 9, "GB"), (10 ** 6, "MB"), (10 ** 3, "kB"))
RATE_UNITS = ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"))


def format_bytes(nbytes: int) -> str:
    """`nbytes` as text: binary units where it is a whole number of quarters of one, else decimal
    units where it is a whole number of one, else bytes."""
    if nbytes < 0:
        raise ValueError(f"size {nbytes!r}: expected a number of bytes, 0 or more")
    for scale, unit in BINARY_SIZES:
        if nbytes >= scale and nbytes % (scale // 4) == 0:
            return f"{nbytes / scale:g} {unit}"
    for scale, unit in DECIMAL_SIZES:
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def rate_unit(bps: float) -> tuple[float, str]:
    """(bit/s per unit, unit name): the largest unit of RATE_UNITS `bps` reaches, Mbit/s at least."""
    return next(((scale, unit) for scale, unit in RATE_UNITS if bps >= scale), RATE_UNITS[-1])


def format_rate(bps: float) -> str:
    """`bps` bit/s as text in its unit (`rate_unit`), three significant digits: '292 Gbit/s'."""
    scale, unit = rate_unit(bps)
    return f"{bps / scale:.3g} {unit}"
