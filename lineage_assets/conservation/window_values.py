"""supplier-stats' values: the column lineage says ``total_price`` sums ``price``, so at the hop's cut

- ``in``: the sum of ``price`` over the committed orders below C (``KafkaCounter.sum``: remembered marks, each order
  decoded once);
- ``out``: the ``total_price`` of each window's last firing (the window book), other producers' records included;
- ``dead_letters``: the sum of ``price`` over the raw orders the dead letters carry (marks as well);
- ``pending``: the sum of ``price`` over the pending orders (the tail book).

Every order weighs the same on every side (values.py: an order the job refused weighs as much in ``in`` as in its
dead letter), so a non-zero difference is a window whose total is not the sum of its orders' prices. It is placed by
reading the tail of ``orders`` again, only then: each open window's orders (those the dead letters do not hold)
against its last firing. A window closed before the reading is not in the tail any more; the difference then says so.
"""

from __future__ import annotations

from collections import Counter

from lineage_assets.conservation.avro_values import AvroValues, dead_raw_value
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.kafka_counts import PartitionCount
from lineage_assets.conservation.kafka_reads import tail_starts, weighed_orders
from lineage_assets.conservation.stores import Stores
from lineage_assets.conservation.values import ValueBalance, text_of, units_of
from lineage_assets.conservation.window_book import WindowBook, utc_text, window_key, window_start
from lineage_assets.conservation.window_cut import Cut
from lineage_assets.conservation.window_tail import TailBook, digest, tail_order, tail_start_ms

#: the windows a difference names at most (the rest are counted)
NAMED = 10
_SCAN = "supplier-windows-values"


def value_balances(
    hop: Hop,
    stores: Stores,
    avro: AvroValues,
    cut: Cut,
    book: WindowBook,
    tail: TailBook,
    counted: dict[tuple[int, int], PartitionCount],
    fired_through: int | None,
) -> tuple[ValueBalance, ...]:
    """One balance per column the hop's column lineage sums (none: no values to weigh). ``counted``: the input's
    counts at the cut, whose start the sums must share (else the values of records retention deleted before they
    were summed are unknown)."""
    found = []
    for column, source in hop.job.summed_columns(hop.output.key).items():
        if not (book.values and tail.values):
            found.append(
                ValueBalance(
                    column,
                    source,
                    unknown="the window book was kept before values were: reset the count store "
                    "(LINEAGE_LAB_CONSERVATION_STORE) to weigh them from the topics' log starts",
                )
            )
            continue
        ins, dead, late = weighed_orders(
            stores,
            hop,
            avro,
            source,
            lambda order, source=source: units_of((order or {}).get(source)),
            {p: [c] for p, c in cut.committed.items()},
            {p: end for p, (_, end) in cut.dlq_end.items()},
            counted,
        )
        if late:
            found.append(
                ValueBalance(
                    column,
                    source,
                    unknown=f"{hop.input.name} partitions {late}: retention deleted records counted before their "
                    f"{source} was summed; the values cannot be weighed against every window",
                )
            )
            continue
        balance = ValueBalance(
            column, source, sum(s.total for s in ins.values()), book.out_units, dead, tail.pending().units
        )
        if balance.differs:
            balance = ValueBalance(
                column,
                source,
                balance.in_,
                balance.out,
                balance.dead_letters,
                balance.pending,
                where=locate(hop, stores, avro, cut, book, fired_through, source),
            )
        found.append(balance)
    return tuple(found)


def locate(
    hop: Hop, stores: Stores, avro: AvroValues, cut: Cut, book: WindowBook, fired_through: int | None, source: str
) -> tuple[str, ...]:
    """The open windows whose last firing is not the count and sum of their orders below C (read again from the
    tail; the orders the dead letters hold left out), each named with both figures."""
    since = tail_start_ms(fired_through)
    consumer = stores.kafka.consumer()
    try:
        offsets = stores.kafka.offsets(hop.input.name)
        starts = tail_starts(
            stores, consumer, hop.input.name, {p: (offsets[p][0], c) for p, c in cut.committed.items()}, since
        )
        dead: Counter[str] = Counter()
        if hop.dead_letters is not None:
            dlq_starts = tail_starts(stores, consumer, hop.dead_letters.name, cut.dlq_end, since)
            ranges = {p: (dlq_starts[p], end) for p, (_, end) in cut.dlq_end.items()}
            for msg in stores.kafka.records(consumer, hop.dead_letters.name, ranges):
                raw = dead_raw_value(msg)
                if raw is not None:
                    dead[digest(raw)] += 1
        sums: dict[str, list[int]] = {}
        ranges = {p: (starts[p], c) for p, c in cut.committed.items()}
        for msg in stores.kafka.records(consumer, hop.input.name, ranges):
            order = tail_order(msg, avro, source)
            if order.raw is not None and dead[digest(order.raw)] > 0:
                dead[digest(order.raw)] -= 1
                continue
            if order.supplier is None or order.bid_ms is None:
                continue
            key = window_key(utc_text(window_start(order.bid_ms)), order.supplier)
            held = sums.setdefault(key, [0, 0])
            held[0] += 1
            held[1] += order.units
    finally:
        consumer.close()
    named = []
    for key, (count, _, units) in sorted(book.windows.items()):
        orders, summed = sums.get(key, (0, 0))
        if summed != units:
            start, supplier = key.split("|", 1)
            named.append(
                f"window {start} supplier {supplier}: {orders} orders summing {text_of(summed)}, its last firing "
                f"says {count} summing {text_of(units)}"
            )
    if not named:
        return ("no open window differs: the difference is in windows closed before this reading",)
    return (*named[:NAMED], *([f"and {len(named) - NAMED} more windows"] if len(named) > NAMED else []))
