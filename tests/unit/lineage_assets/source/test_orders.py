import datetime as dt
import random
import uuid
from decimal import Decimal

from lineage_assets.source.orders import SUPPLIERS, make_orders


def test_orders_look_like_the_reference_labs():
    now = dt.datetime(2025, 5, 1, 10, 0)
    orders = list(make_orders(500, random.Random(7), now=lambda: now))
    assert len({o.order_id for o in orders}) == 500
    for o in orders:
        assert uuid.UUID(o.order_id).version == 4
        assert o.supplier in SUPPLIERS
        price = Decimal(o.price)
        assert Decimal("1.00") <= price <= Decimal("150.00") and price == price.quantize(Decimal("0.01"))
        assert o.price == f"{price:.2f}", "always two decimals, as text"
        assert o.bid_time == now
    assert {o.supplier for o in orders} == set(SUPPLIERS)


def test_same_seed_same_orders():
    fixed = dt.datetime(2025, 1, 1)
    a = list(make_orders(20, random.Random(1), now=lambda: fixed))
    b = list(make_orders(20, random.Random(1), now=lambda: fixed))
    assert a == b
