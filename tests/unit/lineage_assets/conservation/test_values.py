"""Value conservation's arithmetic (values.py) and how a hop's values judge it (balance.py). Every expected value is
written by hand."""

from decimal import Decimal

import pytest

from lineage_assets.conservation.balance import HopBalance, OtherWriter
from lineage_assets.conservation.values import ValueBalance, text_of, units_of, units_of_double


@pytest.mark.parametrize(
    ("price", "cents"),
    [
        ("12.34", 1234),
        ("1.000", 100),  # digits beyond the cent that are zeros: the jobs store 1.00
        ("15000e-3", 1500),
        ("1.5e1", 1500),
        (" 7 ", 700),
        ("99999999.99", 9_999_999_999),
        ("0", 0),
        (b"3.20", 320),
        (Decimal("4.10"), 410),
        (12, 1200),
        ("1.005", 0),  # a digit beyond the cent: refused by the jobs, 0 on both sides
        ("100000000.00", 0),  # does not fit DECIMAL(10,2)
        ("1e999999999", 0),
        ("1e-999999999", 0),
        ("1." + "0" * 5000, 100),
        ("NaN", 0),
        ("-Infinity", 0),
        ("abc", 0),
        ("", 0),
        (None, 0),
        (1.5, 0),  # a float is no price text: the orders carry text, Iceberg decimals
        (True, 0),
        (b"\xff", 0),
    ],
)
def test_a_records_value_is_its_price_in_cents_or_nothing(price, cents):
    assert units_of(price) == cents


def test_a_total_written_as_a_double_is_read_back_to_the_cent():
    assert units_of_double(12.3) == 1230
    assert units_of_double(0.1 + 0.2) == 30
    assert units_of_double(99999999.99 * 3) == 29_999_999_997
    assert units_of_double(float("nan")) == 0
    assert units_of_double("oops") == 0
    assert units_of_double(None) == 0


def test_units_read_as_decimals():
    assert (text_of(12345), text_of(-5), text_of(0), text_of(None)) == ("123.45", "-0.05", "0.00", None)


def test_a_value_balance_names_what_does_not_add_up():
    v = ValueBalance("total_price", "price", 10_000, 9_900, 50, 40, where=("window 12:00:05 supplier A",))
    assert v.difference == 10
    assert v.as_dict() == {
        "source": "price",
        "in": "100.00",
        "out": "99.00",
        "dead_letters": "0.50",
        "pending": "0.40",
        "difference": "0.10",
        "where": ["window 12:00:05 supplier A"],
        "unknown": None,
    }
    assert v.summary() == (
        "total_price (sum of price): in 100.00, out 99.00, dead letters 0.50, pending 0.40, difference 0.10 in "
        "window 12:00:05 supplier A"
    )
    assert ValueBalance("total_price", "price", 1, None, 0, 0).difference is None
    assert ValueBalance("total_price", "price", 1, 1, 0, 0, unknown="the registry did not answer").difference is None


def hop(values=(), writers=()):
    return HopBalance(
        "supplier-stats",
        "kafka://b/orders",
        ("kafka://b/supplier-stats",),
        10,
        8,
        1,
        1,
        values=values,
        other_writers=writers,
    )


def test_counts_that_balance_with_values_that_do_not_fail_the_hop():
    off = ValueBalance("total_price", "price", 1000, 999, 0, 0)
    assert (hop((off,)).status, hop((off,)).wrong, hop((off,)).lost_or_doubled) == ("values_differ", True, False)
    even = ValueBalance("total_price", "price", 1000, 990, 4, 6)
    assert (hop((even,)).status, hop((even,)).wrong) == ("pending", False)
    lost = HopBalance("supplier-stats", "i", ("o",), 10, 7, 1, 1, values=(off,))
    assert lost.status == "missing"  # the count says more
    assert hop().as_dict()["values"] == {}
    assert hop((off,)).as_dict()["values"]["total_price"]["difference"] == "0.01"


def test_accepting_another_writer_takes_its_claimed_values_out_once():
    writer = OtherWriter(
        "kafka://b/supplier-stats",
        "2 foreign records",
        2,
        "records:supplier-stats:0@5",
        "0@6",
        claimed=(("total_price", 700),),
    )
    b = HopBalance(
        "supplier-stats",
        "i",
        ("o",),
        10,
        10,
        1,
        1,
        other_writers=(writer,),
        values=(ValueBalance("total_price", "price", 5000, 5200, 300, 200),),
    )
    assert (b.status, b.values[0].difference) == ("duplicates", -700)
    assert writer.as_dict()["values"] == {"total_price": "7.00"}
    taken = b.with_accepted({"records:supplier-stats:0@5": "0@6"})
    assert (taken.status, taken.out, taken.values[0].out, taken.values[0].difference) == ("pending", 8, 4500, 0)
