"""What the archive hop reads besides the listing: each object's lines (GET once per key and ETag, remembered), a few
keys looked at (HEAD), the dead letters' sources (Connect's error headers), record positions from the remembered
marks, and the age of the oldest pending record."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lineage_assets.conservation.archive_listing import s3_unavailable

GET_THREADS = 8


def count_lines(body: Iterable[bytes]) -> int:
    """JSON lines in an object: newlines, plus a last line without one."""
    lines, last = 0, b"\n"
    for chunk in body:
        if chunk:
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def fact_lines(text: str) -> int:
    """The line count of a remembered object fact (``{"etag": ..., "checksum": c, "lines": n}``, as ``object_lines``
    writes it), read from the end of the text: decoding 40 000 facts as JSON each run cost more than everything else."""
    head, sep, tail = text.rpartition(', "lines": ')
    if sep and head.startswith('{"etag": ') and tail.endswith("}") and tail[:-1].isdigit():
        return int(tail[:-1])
    return int(json.loads(text)["lines"])


def fact_checksum(text: str) -> int | None:
    """The checksum of a remembered object fact (None: remembered before checksums were), read as ``fact_lines``."""
    head, sep, _ = text.rpartition(', "lines": ')
    head, sep2, value = head.rpartition(', "checksum": ')
    if sep and sep2 and head.startswith('{"etag": ') and value.isdigit():
        return int(value)
    return json.loads(text).get("checksum")


#: an object's figures: its lines, and the sum of its lines' weights (None: not weighed)
Figures = tuple[int, int | None]
Weigher = Callable[[bytes], int]


#: a line longer than this is no record of the sink (its records are a few hundred bytes): weighed 0, not buffered
LONGEST_LINE = 1 << 20


def weighed_lines(body: Iterable[bytes], weigh_line: Weigher) -> Figures:
    """(JSON lines, the sum of their weights) of an object's body, read chunk by chunk (an object of another
    writer can be of any size)."""
    lines = total = 0
    rest, overlong = b"", False
    for chunk in body:
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        for line in parts:
            lines += 1
            total += 0 if overlong else weigh_line(line)
            overlong = False
        if len(rest) > LONGEST_LINE:
            rest, overlong = b"", True
    if rest or overlong:
        lines += 1
        total += 0 if overlong else weigh_line(rest)
    return lines, total


def object_lines(
    s3: Any,
    bucket: str,
    listed: Mapping[str, str],
    remembered: Mapping[str, Any],
    remember: Callable[[dict[str, str]], None],
    endpoint: str,
    weigh_line: Weigher | None = None,
) -> tuple[dict[str, Figures], int]:
    """(key -> figures of every listed object still there, how many were read now). An object is read (GET) only
    when no figures are remembered for its key and ETag (a checksum too, when ``weigh_line`` is given); its figures
    are remembered under the ETag the GET returned."""
    found: dict[str, Figures] = {}
    todo = []
    for key, etag in listed.items():
        fact = remembered.get(key)
        fact = json.loads(fact) if isinstance(fact, str) else fact
        if fact and fact["etag"] == etag and (weigh_line is None or fact.get("checksum") is not None):
            found[key] = (fact["lines"], fact.get("checksum"))
        else:
            todo.append(key)

    def read(key: str) -> tuple[str, str, Figures] | None:
        try:
            response = s3.get_object(Bucket=bucket, Key=key)
            if weigh_line is None:
                figures: Figures = (count_lines(response["Body"].iter_chunks(1 << 20)), None)
            else:
                figures = weighed_lines(response["Body"].iter_chunks(1 << 20), weigh_line)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None  # deleted since the listing: not there now
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        except BotoCoreError as exc:
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        return key, response["ETag"], figures

    with ThreadPoolExecutor(GET_THREADS) as pool:
        batch: dict[str, str] = {}
        for done in pool.map(read, todo):
            if done is None:
                continue
            key, etag, (n, checksum) = done
            found[key] = (n, checksum)
            weighed = {} if checksum is None else {"checksum": checksum}
            batch[key] = json.dumps({"etag": etag, **weighed, "lines": n})
            if len(batch) >= 500:
                remember(batch)
                batch = {}
        if batch:
            remember(batch)
    return found, len(todo)


def heads(s3: Any, bucket: str, keys: Iterable[str], endpoint: str) -> dict[str, str | None]:
    """key -> ETag now (None: not there) of a few keys, one HEAD each."""

    def head(key: str) -> tuple[str, str | None]:
        try:
            return key, s3.head_object(Bucket=bucket, Key=key)["ETag"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return key, None
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc
        except BotoCoreError as exc:
            raise s3_unavailable(endpoint, f"reading s3://{bucket}/{key}", exc) from exc

    todo = sorted(set(keys))
    if not todo:
        return {}
    with ThreadPoolExecutor(GET_THREADS) as pool:
        return dict(pool.map(head, todo))
