"""What a running job tells about its own deployment, in Flink's global job parameters (readable over REST by
whoever looks): the deployment version and the program arguments it was started with. With them, the job sensor
recognises a pipeline job that someone else started, and `stack up` can start a job again exactly as it ran
(arguments never carry secrets: those reach the driver in its environment, see connections.py).

Shipped with every submission beside connections.py; imported by the drivers and by the deploying side alike.
"""

from __future__ import annotations

import base64
import json

VERSION = "lineage-lab.version"
ARGS = "lineage-lab.args"
#: the job's column lineage, read by its driver from its compiled plan (a Table API job; see PlanLineage)
LINEAGE = "lineage-lab.lineage"
#: why the driver could not read it (the job runs all the same; the account of its columns is then unknown)
LINEAGE_ERROR = "lineage-lab.lineage-error"


def encode_json(value: object) -> str:
    """A JSON value as one value that Flink's map syntax (``k:v,k:v``) keeps whole: base64 of its JSON."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def decode_json(value: str) -> object:
    """What ``encode_json`` wrote; None for anything else."""
    try:
        return json.loads(base64.urlsafe_b64decode(value.encode()))
    except (ValueError, TypeError):
        return None


def encode_args(args: list[str]) -> str:
    """The arguments as one config value (``encode_json`` of the list)."""
    return encode_json(args)


def decode_args(value: str) -> list[str] | None:
    """The arguments ``encode_args`` wrote; None for anything else (a job started by an older build)."""
    args = decode_json(value)
    return [str(a) for a in args] if isinstance(args, list) else None


def without_version(argv: list[str]) -> list[str]:
    """The program arguments less ``--version V`` (the version is recorded under its own key)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--version":
            skip = True
        elif not arg.startswith("--version="):
            out.append(arg)
    return out


def job_parameters(version: str, argv: list[str]) -> dict[str, str]:
    """The global job parameters every pipeline job carries."""
    return {VERSION: version, ARGS: encode_args(without_version(argv))}


def as_config_map(parameters: dict[str, str]) -> str:
    """``pipeline.global-job-parameters`` in Flink's map syntax (the values hold no ``:`` or ``,``)."""
    return ",".join(f"{k}:{v}" for k, v in parameters.items())
