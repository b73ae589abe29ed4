"""Value conservation: where the column lineage says an output column sums an input column, the hop balances the
values as well as the counts, so a job that drops a cent from every window, or sums the wrong column, fails even
when every count is right.

Values are exact integers of the column's smallest unit (cents for ``DECIMAL(10,2)`` prices): an order's value is
its price when the price is a finite decimal of at most two places inside the column's range, else 0. Both sides of
a hop apply the same rule to the same bytes (an order and its dead letter carry the same raw value), so an order
without a value weighs 0 on both and never makes a difference; no decimal context can round, and a hostile price
such as ``1e999999999`` costs nothing. Reports show values as decimal strings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

#: the smallest unit's places: prices are DECIMAL(10,2) wherever they are stored as numbers (Iceberg, the windows)
PLACES = 2
#: the largest value the column holds, in units (99999999.99)
MAX_UNITS = 10 ** (10) - 1
_SCALE = 10**PLACES
#: the value balance of a copy: the sum of its records' digests (checksums.py), an integer
CHECKSUM = "checksum"


def units_of(value: Any) -> int:
    """The value of one record's column in units (cents), exact for every price the jobs accept: a finite decimal,
    not above ``MAX_UNITS``, whose digits beyond the cent are zeros (``1.000`` is 100, as the jobs store it). Anything
    else is 0, the same on both sides of a hop: missing, unparsable, NaN, a digit beyond the cent, out of range.
    Never scales by an exponent taken from the data (``1e999999999`` costs nothing), as the jobs' rule does not."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return 0
    if isinstance(value, str):
        try:
            value = Decimal(value.strip())
        except (InvalidOperation, ValueError):
            return 0
    elif isinstance(value, int) and not isinstance(value, bool):
        value = Decimal(value)
    if not isinstance(value, Decimal) or not value.is_finite() or value.is_zero():
        return 0
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int) or value.adjusted() > 10:
        return 0
    extra = -PLACES - exponent  # digits beyond the cent
    if extra <= 0:
        units = int("".join(map(str, digits))) * 10 ** (-extra)
    elif extra >= len(digits) or any(digits[-extra:]):
        return 0
    else:
        units = int("".join(map(str, digits[:-extra])))
    units = -units if sign else units
    return units if abs(units) <= MAX_UNITS else 0


def units_of_double(value: Any) -> int:
    """A total the job wrote as a double of ``PLACES`` places (supplier-stats' ``total_price``), in units; 0 when
    it is no finite number. Exact for totals below 2**53 units: the shortest repr of the double is the decimal."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        return 0
    try:
        number = Decimal(repr(value) if isinstance(value, float) else str(value))
    except InvalidOperation:
        return 0
    if not number.is_finite() or number.adjusted() > 18:
        return 0
    return int(number.scaleb(PLACES).to_integral_value())


def text_of(units: int | None, places: int = PLACES) -> str | None:
    """``units`` as the decimal it stands for (``12345`` -> ``"123.45"``); None stays None."""
    if units is None:
        return None
    return str(Decimal(units).scaleb(-places)) if places else str(units)


def difference_of(in_: int | None, out: int | None, dead_letters: int | None, pending: int | None) -> int | None:
    """in - (out + dead letters + pending), in units; None when a figure is unknown."""
    if in_ is None or out is None or dead_letters is None or pending is None:
        return None
    return in_ - out - dead_letters - pending


@dataclass(frozen=True)
class ValueBalance:
    """One summed column of a hop: the input column's values in, the output column's values out, the dead letters'
    and pending records' values, all in units. ``where`` names the windows, days or objects a difference is in
    (as far as the reader can place it); ``unknown`` says why a figure could not be read."""

    column: str  # the output column (``total_price``)
    source: str  # the input column it sums (``price``)
    in_: int | None = None
    out: int | None = None
    dead_letters: int | None = None
    pending: int | None = None
    where: tuple[str, ...] = ()
    unknown: str = ""
    #: the places of the unit: 2 for cents, 0 for a checksum (a sum of per-record digests, an integer)
    places: int = PLACES

    @property
    def difference(self) -> int | None:
        return None if self.unknown else difference_of(self.in_, self.out, self.dead_letters, self.pending)

    @property
    def differs(self) -> bool:
        return bool(self.difference)

    def less(self, out: int = 0, dead_letters: int = 0) -> ValueBalance:
        """This balance with accepted other writers' values taken out of the figure they were in."""
        if self.out is None or self.dead_letters is None:
            return self
        return replace(self, out=self.out - out, dead_letters=self.dead_letters - dead_letters)

    def summary(self) -> str:
        what = f"{self.column} (sum of {self.source})" if self.places else f"{self.column} of {self.source}"
        if self.difference is None:
            return f"{what}: unknown: {self.unknown or 'a figure could not be read'}"
        text = {k: text_of(getattr(self, k), self.places) for k in ("in_", "out", "dead_letters", "pending")}
        head = (
            f"{what}: in {text['in_']}, out {text['out']}, dead letters {text['dead_letters']}, pending "
            f"{text['pending']}, difference {text_of(self.difference, self.places)}"
        )
        return head + (f" in {'; '.join(self.where)}" if self.where and self.differs else "")

    def as_dict(self) -> dict[str, Any]:
        """``reconcile --json``'s ``values.<column>``: decimals as strings."""
        return {
            "source": self.source,
            "in": text_of(self.in_, self.places),
            "out": text_of(self.out, self.places),
            "dead_letters": text_of(self.dead_letters, self.places),
            "pending": text_of(self.pending, self.places),
            "difference": text_of(self.difference, self.places),
            "where": list(self.where),
            "unknown": self.unknown or None,
        }
