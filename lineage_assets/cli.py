"""``lineage-lab``: run the embedded stack and resolve its artifacts; run the pipeline on it, and ask its lineage.

lineage-lab lineage outbox [--flush]     the lineage outbox; --flush delivers what is queued
lineage-lab lineage drain|graph          deliver the outbox continuously; the graph in Marquez by identity (JSON)
lineage-lab pipeline run [--orders N]    the main job: deploy, orders, Iceberg, supplier_stats, checks, verify
lineage-lab verify [--html PATH]         Dagster's graph vs the lineage graph, side by side; exit 1 on drift
lineage-lab impact DATASET[.COLUMN]      what a change would touch downstream, from Marquez's lineage
lineage-lab reconcile [--deep] [--job J] every hop's records accounted for; exit 1 on loss or duplication
"""

# The entry point (`lineage-lab`, `python -m lineage_assets.cli`), on top of the house: infra/cli.py's stack commands,
# then the app's (lineage, pipeline, verify, impact, reconcile); `stack up` / `stack down` get the app's Flink steps
# as hooks. The help lists the stack's commands (infra/cli.py's docstring), then the app's (this one's).

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from infra import cli as stack_cli
from infra.settings import StackSettings

if TYPE_CHECKING:
    from lineage_assets.conservation.stores import Stores


def resume_flink_jobs(settings: StackSettings) -> list[str]:
    """Resume the pipeline's Flink jobs that ``stack down`` suspended; the errors, if any. The wired resources are
    built here, on the top floor, so suspension (a technology module) never imports the wiring above it."""
    from lineage_assets.flink.suspension import RESOURCE_KEYS, resume
    from lineage_assets.resources import opened_resources

    return resume(settings, opened_resources(settings, RESOURCE_KEYS))


def suspend_flink_jobs(settings: StackSettings) -> None:
    """Suspend the pipeline's Flink jobs with savepoints, so that ``stack up`` resumes them."""
    from lineage_assets.flink.suspension import RESOURCE_KEYS, suspend
    from lineage_assets.resources import opened_resources

    suspend(settings, opened_resources(settings, RESOURCE_KEYS))


def endpoints(settings: StackSettings) -> dict[str, str]:
    """The stack's endpoints (infra's) plus the Marquez page of the Kafka orders' lineage, which needs the pipeline's
    naming and so lives in the app; placed after the Marquez API, where scripts have always found it."""
    from infra.endpoints import endpoints as stack_endpoints
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.lineage.marquez_client import lineage_page

    orders = Pipeline.from_settings(settings).dataset("kafka_orders")
    page = lineage_page(settings.marquez_web_url, orders.namespace, orders.name)
    items = list(stack_endpoints(settings).items())
    at = [key for key, _ in items].index("MARQUEZ_API_URL") + 1
    return dict([*items[:at], ("ORDERS_LINEAGE_URL", page), *items[at:]])


def _lineage(args: argparse.Namespace, settings: StackSettings) -> int:
    from lineage_assets.lineage.outbox import Drainer, LineageEmitter, Outbox

    if args.action == "drain":
        print(f"draining {settings.lineage_outbox} to {settings.marquez_url} (Ctrl-C stops)", flush=True)
        LineageEmitter(
            settings.lineage_outbox,
            settings.marquez_url,
            workers=settings.lineage_drain_workers,
            api_key=settings.marquez_api_key or None,
        ).run_forever()
        return 0
    if args.action == "graph":
        return _keyed_graph(settings)
    outbox = Outbox(settings.lineage_outbox)
    if args.flush:
        drainer = Drainer(
            outbox, settings.marquez_url, workers=settings.lineage_drain_workers, api_key=settings.marquez_api_key
        )
        done = drainer.flush(timeout=args.timeout)
        if not done:
            print(
                f"events remain queued after {args.timeout:.0f}s: is the lineage backend at {settings.marquez_url} up?"
            )
    c = outbox.counts()
    print(f"outbox {settings.lineage_outbox}")
    print(
        f"  queued {c.queued}  sent {c.sent}  rejected {c.rejected}  superseded {c.superseded}  "
        f"duplicates dropped {c.duplicates_dropped}"
    )
    print(f"  backlog {c.queued} event(s), the oldest waiting {c.backlog_age:.1f} s (target {settings.marquez_url})")
    for job, attempts, error in outbox.pending_errors()[:10]:
        print(f"  retrying {job} (attempt {attempts}): {error}")
    for dead in outbox.dead_letters():
        print(f"  dead letter #{dead.seq} {dead.job} {dead.event_type} run {dead.run_id}: {dead.reason}")
    return 0 if c.queued == 0 or not args.flush else 1


def _keyed_graph(settings: StackSettings) -> int:
    """Print the pipeline's graph in Marquez keyed by identity-module keys (JSON), to compare two deployments."""
    import json

    from lineage_assets.checks.keyed_graph import keyed_graph
    from lineage_assets.checks.marquez_graph import from_marquez
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.lineage.marquez_client import MarquezClient, MarquezError

    client = MarquezClient(settings.marquez_url, api_key=settings.marquez_api_key or None)
    try:
        graph = from_marquez(client, Pipeline.from_settings(settings))
    except MarquezError as exc:
        print(f"error: cannot read the lineage graph from Marquez at {settings.marquez_url}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(keyed_graph(Pipeline.from_settings(settings), graph), indent=1))
    return 0


def _verify(args: argparse.Namespace, settings: StackSettings) -> int:
    from pathlib import Path

    from lineage_assets.checks.drift_report import verify_and_render
    from lineage_assets.lineage.marquez_client import MarquezError

    try:
        report, picture = verify_and_render(settings, Path(args.html) if args.html else None)
    except MarquezError as exc:
        print(f"cannot verify: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    print(f"\npicture of the lineage graph: {picture}")
    return 0 if report.ok else 1


def _impact(args: argparse.Namespace, settings: StackSettings) -> int:
    import json

    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.lineage.impact import UnknownTarget, impact, resolve
    from lineage_assets.lineage.marquez_client import MarquezClient, MarquezError

    pipeline = Pipeline.from_settings(settings)
    try:
        target = resolve(pipeline, args.target)
        found = impact(MarquezClient(settings.marquez_url, api_key=settings.marquez_api_key), target, depth=args.depth)
    except UnknownTarget as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MarquezError as exc:
        print(f"cannot read the lineage: {exc}", file=sys.stderr)
        return 2
    if args.json:
        as_dicts = {
            "target": {"namespace": target.dataset.namespace, "name": target.dataset.name, "column": target.column},
            "datasets": [{"namespace": ns, "name": name} for ns, name in found.datasets],
            "columns": [{"namespace": ns, "name": name, "column": c} for ns, name, c in found.columns],
            "jobs": [{"namespace": ns, "name": name} for ns, name in found.jobs],
            "assets": found.assets(pipeline),
        }
        print(json.dumps(as_dicts, indent=2))
    else:
        print(found.text(pipeline))
    return 0


def _reconcile(args: argparse.Namespace, settings: StackSettings) -> int:
    import getpass
    import json

    from lineage_assets.conservation.acceptances import AcceptanceError
    from lineage_assets.conservation.reconcile import accepted_of, reconcile
    from lineage_assets.conservation.stores import RESOURCE_KEYS, Stores, count_store_path
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.resources import opened_resources

    pipeline = Pipeline.from_settings(settings)
    unknown_jobs = sorted(set(args.job) - set(pipeline.jobs))
    if unknown_jobs:
        print(f"error: no job {unknown_jobs}; the pipeline's jobs: {sorted(pipeline.jobs)}", file=sys.stderr)
        return 2
    if (args.accept or args.revoke) and len(args.job) != 1:
        print(
            "error: --accept and --revoke need exactly one --job (the hop whose other writer they are about)",
            file=sys.stderr,
        )
        return 2
    resources = opened_resources(settings, RESOURCE_KEYS)
    stores = Stores(
        pipeline, resources, count_store_path(settings), deep=args.deep, deep_range={"last": args.deep_last}
    )
    try:
        _change_acceptances(args, stores, by=f"{getpass.getuser()} (lineage-lab reconcile)")
    except AcceptanceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.acceptances:
        return _print_acceptances(args, stores)
    found = reconcile(stores, jobs=args.job or None, confirm_after_s=args.confirm_after)
    if args.json:
        hops = [{**b.as_dict(), "acceptances": [a.as_dict() for a in accepted_of(stores, b.job)]} for b in found]
        print(json.dumps(hops, indent=2, default=str))
    else:
        for b in found:
            print(b.summary())
            for note in b.notes:
                print(f"    {note}")
    if any(b.wrong for b in found):
        return 1
    return 2 if any(b.status == "unknown" for b in found) else 0


def _change_acceptances(args: argparse.Namespace, stores: Stores, by: str) -> None:
    """``--revoke`` then ``--accept`` on the one ``--job``; what was done goes to stderr (stdout stays the report)."""
    from lineage_assets.conservation.reconcile import accept, revoke

    if args.revoke:
        for a in revoke(stores, args.job[0], args.revoke):
            print(f"revoked: {a.text()}", file=sys.stderr)
    if args.accept:
        for a in accept(stores, args.job[0], args.accept, by=by):
            print(f"accepted: {a.text()}", file=sys.stderr)


def _print_acceptances(args: argparse.Namespace, stores: Stores) -> int:
    """``--acceptances``: the accepted changes of each hop (or those of ``--job``), with who accepted them and when."""
    import json

    from lineage_assets.conservation.reconcile import accepted_of
    from lineage_assets.conservation.rules import reconciled_hops

    chosen = [j for j in reconciled_hops(stores.pipeline) if not args.job or j in args.job]
    found = {job: accepted_of(stores, job) for job in chosen}
    if args.json:
        print(json.dumps({job: [a.as_dict() for a in made] for job, made in found.items()}, indent=2))
        return 0
    for job, made in found.items():
        print(f"{job}: " + ("no acceptances" if not made else f"{len(made)} acceptance(s)"))
        for a in made:
            print(f"    {a.text()}")
    return 0


def _pipeline(args: argparse.Namespace, settings: StackSettings) -> int:
    from lineage_assets.definitions import build_definitions
    from lineage_assets.main_job import PipelineError, run_main_job

    try:
        return 0 if run_main_job(build_definitions(settings), settings, orders=args.orders) else 1
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add the app's commands to the ``lineage-lab`` parser's subcommands (after the stack's)."""
    lineage = sub.add_parser("lineage", help="lineage delivery")
    lineage_sub = lineage.add_subparsers(dest="action", required=True)
    outbox = lineage_sub.add_parser("outbox", help="show the outbox; --flush delivers what is queued")
    outbox.add_argument("--flush", action="store_true")
    outbox.add_argument("--timeout", type=float, default=60.0)
    lineage_sub.add_parser("drain", help="deliver the outbox continuously (foreground)")
    lineage_sub.add_parser("graph", help="the pipeline's graph in Marquez keyed by identity keys (JSON)")

    pipe = sub.add_parser("pipeline", help="the whole pipeline against the running stack")
    pipe_sub = pipe.add_subparsers(dest="action", required=True)
    run = pipe_sub.add_parser("run", help="deploy, generate orders, Iceberg, supplier_stats, checks, verify")
    run.add_argument("--orders", type=int, default=200)

    check = sub.add_parser("verify", help="Dagster's graph vs the lineage graph, side by side; exit 1 on drift")
    check.add_argument("--html", help="where to write the picture (default: <state>/data/lineage/graph.html)")

    imp = sub.add_parser("impact", help="datasets, columns, jobs and assets downstream of DATASET[.COLUMN]")
    imp.add_argument("target", help="a dataset's name, key, asset key or catalog name, optionally .COLUMN")
    imp.add_argument("--depth", type=int, default=20, help="hops Marquez follows (default 20)")
    imp.add_argument("--json", action="store_true", help="machine-readable output")

    rec = sub.add_parser(
        "reconcile",
        help="every hop's records accounted for (in = out + dead letters + pending); exit 1 on loss or "
        "duplication, 2 when a store cannot be read",
    )
    rec.add_argument("--json", action="store_true", help="a list of hops: job, input, outputs, in, out, ...")
    rec.add_argument("--deep", action="store_true", help="also audit record by record (keys) over a chosen range")
    rec.add_argument(
        "--deep-last",
        type=int,
        default=10_000,
        help="the range --deep audits: the last N records of each input partition (default 10000)",
    )
    rec.add_argument("--job", action="append", default=[], help="only this hop (its job's name); repeatable")
    rec.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="REF",
        help="accept another writer's change to the --job hop's output as intended (a deletion by request, a "
        "backfill): REF as the report names it in [brackets]; it covers the change up to its position now (a Kafka "
        "writer's later records are named again); its rows then leave the balance; repeatable",
    )
    rec.add_argument(
        "--revoke",
        action="append",
        default=[],
        metavar="REF",
        help="undo the acceptance of REF on the --job hop: the change counts and is named again; repeatable",
    )
    rec.add_argument(
        "--acceptances",
        action="store_true",
        help="list the accepted changes (of --job, or every hop): ref, position, who and when; no reconciliation",
    )
    rec.add_argument(
        "--confirm-after",
        type=float,
        default=25.0,
        help="seconds before a streaming hop that "
        "looks lost or doubled is read again at the next checkpoint (0: report the first look)",
    )


#: what `stack up` and `stack down` do for the pipeline's Flink jobs
STACK_HOOKS = stack_cli.StackHooks(on_flink_up=resume_flink_jobs, before_flink_down=suspend_flink_jobs)


def _stack(args: argparse.Namespace, settings: StackSettings) -> int:
    return stack_cli.stack(args, settings, STACK_HOOKS)


HANDLERS: dict[str, Callable[[argparse.Namespace, StackSettings], int]] = {
    **stack_cli.HANDLERS,
    "stack": _stack,
    "lineage": _lineage,
    "verify": _verify,
    "pipeline": _pipeline,
    "impact": _impact,
    "reconcile": _reconcile,
}


def parser() -> argparse.ArgumentParser:
    """The whole ``lineage-lab`` parser: the stack's commands, then the app's."""
    title, app_commands = __doc__.split("\n\n", 1)
    stack_commands = stack_cli.__doc__.split("\n\n", 1)[1]
    return stack_cli.parser(f"{title}\n\n{stack_commands}{app_commands}", add_commands)


def main(argv: list[str] | None = None) -> int:
    """``lineage-lab``: every command, ``stack up`` / ``stack down`` with the app's hooks."""
    return stack_cli.run(parser().parse_args(argv), HANDLERS)


if __name__ == "__main__":
    # `python -m lineage_assets.cli COMMAND ...` is `lineage-lab COMMAND ...`; with no command, or only --shell, it
    # prints the endpoints for scripts (scripts/run.sh evaluates `--shell`)
    if sys.argv[1:] in ([], ["--shell"]):
        from infra.endpoints import main as print_endpoints

        print_endpoints(sys.argv[1:], endpoints)
    else:
        sys.exit(main())
