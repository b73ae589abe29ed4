"""The one rule for a valid order: every hostile kind of order gets its own reason, the same one in both Flink jobs
(they call the rule through the codec), and the Spark job's count uses the same clock-free part."""

import datetime as dt
from decimal import Decimal

import pytest

from flink_jobs.valid_order import OrderRule

NOW = dt.datetime(2026, 11, 23, 12, 0, 0)
RULE = OrderRule(max_future_s=3600, max_past_s=7 * 24 * 3600)


def reason(price="12.30", bid=NOW, order_id="o-1", supplier="Alice"):
    return RULE.reason(order_id, supplier, Decimal(price), bid, NOW)


@pytest.mark.parametrize("price", ["0", "0.00", "12.3", "12.340", "99999999.99"])
def test_prices_that_fit_decimal_10_2_are_valid(price):
    assert reason(price) is None


@pytest.mark.parametrize(
    ("price", "why"),
    [
        ("1e309", "price 1E+309 does not fit DECIMAL(10,2)"),
        ("123456789012345", "price 123456789012345 does not fit DECIMAL(10,2)"),
        ("100000000.00", "price 100000000.00 does not fit DECIMAL(10,2)"),
        ("12.345", "price 12.345 does not fit DECIMAL(10,2)"),
        ("-1.00", "price -1.00 is negative"),
        ("Infinity", "price Infinity is not a finite number"),
        ("NaN", "price NaN is not a finite number"),
    ],
)
def test_each_invalid_price_has_its_reason(price, why):
    assert reason(price) == why


def test_bid_time_must_lie_inside_the_plausibility_window():
    assert reason(bid=NOW + dt.timedelta(seconds=3600)) is None
    assert reason(bid=NOW - dt.timedelta(days=7)) is None
    future = reason(bid=dt.datetime(9999, 12, 31, 23, 59, 59))
    assert (
        future
        == "bid_time 9999-12-31T23:59:59Z is more than 3600 s after processing time (LINEAGE_LAB_ORDER_MAX_FUTURE_S)"
    )
    past = reason(bid=dt.datetime(2000, 1, 1))
    assert (
        past
        == "bid_time 2000-01-01T00:00:00Z is more than 604800 s before processing time (LINEAGE_LAB_ORDER_MAX_PAST_S)"
    )


def test_order_id_and_supplier_must_not_be_empty():
    assert reason(order_id=" ") == "order_id is empty"
    assert reason(supplier="") == "supplier is empty"


def test_a_negative_window_is_a_configuration_error():
    with pytest.raises(ValueError, match="must not be negative"):
        OrderRule(max_future_s=-1)
