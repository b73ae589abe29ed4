"""``lineage-lab``: run the embedded stack and resolve its artifacts; run the pipeline on it, and ask its lineage.

lineage-lab stack up [SERVICE ...]       start (in order) what is not running; idempotent
lineage-lab stack down                   stop everything lineage-lab started, nothing else
lineage-lab stack status                 each service with port, pid and health
lineage-lab stack logs [SERVICE] [-n N] [-f]
lineage-lab service run|health SERVICE   one service in the foreground, as a container's main process
lineage-lab artifacts resolve|list       JVM artifacts of infra/artifacts.toml
lineage-lab lineage outbox [--flush]     the lineage outbox; --flush delivers what is queued
lineage-lab lineage drain|graph          deliver the outbox continuously; the graph in Marquez by identity (JSON)
lineage-lab pipeline run [--orders N]    the main job: deploy, orders, Iceberg, supplier_stats, checks, verify
lineage-lab verify [--html PATH]         Dagster's graph vs the lineage graph, side by side; exit 1 on drift
lineage-lab impact DATASET[.COLUMN]      what a change would touch downstream, from Marquez's lineage
lineage-lab reconcile [--deep] [--job J] every hop's records accounted for; exit 1 on loss or duplication
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from infra import artifacts, supervisor
from infra.services import build_stack, select
from infra.services.base import ServiceError, read_pid
from infra.settings import SettingsError, StackSettings


def _stack(args: argparse.Namespace, settings: StackSettings) -> int:
    services = build_stack(settings)
    external = settings.external()
    if args.action == "up":
        from lineage_assets.kafka.connection import KafkaConnection

        KafkaConnection.from_settings(settings)  # contradicting Kafka security settings fail before anything starts
        chosen = select(services, args.services)
        for svc in [s for s in chosen if s.name in external]:
            state = "reachable" if supervisor.reachable(external[svc.name]) else "NOT reachable"
            print(f"  {svc.name}: external at {external[svc.name]} ({state}), not started")
        chosen = [s for s in chosen if s.name not in external]
        bundles = artifacts.load_manifest()
        needed = sorted({b for s in chosen for b in s.bundles})
        if any(not artifacts.is_resolved(settings.jars_dir, bundles[b]) for b in needed):
            artifacts.resolve_all(settings.jars_dir, needed, log=lambda m: print(f"  {m}"))
        started = time.monotonic()
        print(f"Starting {len(chosen)} service(s); state in {settings.home}")
        running = supervisor.up(chosen)  # a line for each service it starts; those already running are counted
        print(
            f"All healthy in {time.monotonic() - started:.1f}s ({len(running)} already running, "
            f"{len(chosen) - len(running)} started). `lineage-lab stack status` shows them."
        )
        if {"flink-jobmanager", "flink-taskmanager"} <= {s.name for s in chosen}:  # the jobs `stack down` suspended
            from lineage_assets.flink.suspension import resume

            errors = resume(settings)
            for error in errors:
                print(f"  flink: {error}", file=sys.stderr)
            if errors:
                return 1
    elif args.action == "down":
        if "flink-jobmanager" not in external and any(s.name == "flink-jobmanager" and read_pid(s) for s in services):
            from lineage_assets.flink.suspension import suspend

            print("Suspending the pipeline's Flink jobs (savepoints; `stack up` resumes them)")
            try:
                suspend(settings)
            except Exception as exc:  # a stop must never be blocked: the jobs' retained checkpoints remain
                print(f"  flink: suspending failed ({exc}); the next deploy starts from the retained checkpoints")
        supervisor.down(services)
    elif args.action == "status":
        rows = supervisor.status([s for s in services if s.name not in external])
        print(f"{'service':<20} {'port(s)':<14} {'pid':<8} {'state':<24} log / endpoint")
        ok = all(r.state == "healthy" for r in rows)
        for r in rows:
            ports = ",".join(map(str, r.ports))
            print(f"{r.name:<20} {ports:<14} {r.pid or '-':<8} {r.state:<24} {r.log}")
        for name, endpoint in external.items():
            up = endpoint.startswith("(") or supervisor.reachable(endpoint)
            ok = ok and up
            print(f"{name:<20} {'-':<14} {'-':<8} {'external' if up else 'external, unreachable':<24} {endpoint}")
        return 0 if ok else 3
    elif args.action == "logs":
        targets = select(services, [args.service] if args.service else [])
        paths = [str(s.log_path) for s in targets if s.log_path.exists()]
        if not paths:
            print("no logs yet: the stack has not been started")
            return 1
        cmd = ["tail", f"-n{args.lines}", *(["-F"] if args.follow else []), *paths]
        return subprocess.call(cmd)
    return 0


def _service(args: argparse.Namespace, settings: StackSettings) -> int:
    from infra import container

    (svc,) = select(build_stack(settings), [args.service])
    if args.action == "run":
        return container.run(svc)
    return 0 if container.healthy(svc) else 1


def _artifacts(args: argparse.Namespace, settings: StackSettings) -> int:
    if args.action == "resolve":
        artifacts.resolve_all(settings.jars_dir, args.bundles or None)
    else:
        for name, bundle in artifacts.load_manifest().items():
            state = "resolved" if artifacts.is_resolved(settings.jars_dir, bundle) else "missing"
            print(f"{name:<22} {state:<9} {bundle.purpose}")
            for c in bundle.artifacts:
                print(f"    {c.group}:{c.artifact}:{c.version}{':' + c.classifier if c.classifier else ''}")
    return 0


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
    from lineage_assets.lineage.marquez import MarquezClient, MarquezError

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

    from lineage_assets.checks.verify import verify_and_render
    from lineage_assets.lineage.marquez import MarquezError

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
    from lineage_assets.lineage.marquez import MarquezClient, MarquezError

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
    from types import SimpleNamespace

    import dagster as dg

    from lineage_assets.conservation.reconcile import accept, reconcile
    from lineage_assets.conservation.stores import RESOURCE_KEYS, Stores
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.resources import build_resources

    pipeline = Pipeline.from_settings(settings)
    unknown_jobs = sorted(set(args.job) - set(pipeline.jobs))
    if unknown_jobs:
        print(f"error: no job {unknown_jobs}; the pipeline's jobs: {sorted(pipeline.jobs)}", file=sys.stderr)
        return 2
    if args.accept and len(args.job) != 1:
        print("error: --accept needs exactly one --job (the hop whose other writer it accepts)", file=sys.stderr)
        return 2
    # the resources as a check gets them, their EnvVars resolved here: `dg.build_resources` would make an ephemeral
    # Dagster instance for resources that need no setup (2-3 s of a run's fixed cost)
    resources = SimpleNamespace(
        **{
            k: type(r)(**{f: (v.get_value() if isinstance(v, dg.EnvVar) else v) for f, v in r})
            for k, r in build_resources(settings).items()
            if k in RESOURCE_KEYS
        }
    )
    stores = Stores(settings, pipeline, resources, deep=args.deep, deep_range={"last": args.deep_last})
    if args.accept:
        (now,) = reconcile(stores, jobs=args.job, confirm_after_s=0)
        named = {w.reference for w in now.other_writers}
        unknown_refs = sorted(set(args.accept) - named)
        if unknown_refs:
            print(
                f"error: {unknown_refs} is not another writer of {args.job[0]}'s output now; it names: "
                f"{sorted(named) or 'none'}",
                file=sys.stderr,
            )
            return 2
        accept(stores, args.job[0], args.accept, by=f"{getpass.getuser()} (lineage-lab reconcile --accept)")
    found = reconcile(stores, jobs=args.job or None, confirm_after_s=args.confirm_after)
    if args.json:
        print(json.dumps([b.as_dict() for b in found], indent=2, default=str))
    else:
        for b in found:
            print(b.summary())
            for note in b.notes:
                print(f"    {note}")
    if any(b.lost_or_doubled for b in found):
        return 1
    return 2 if any(b.status == "unknown" for b in found) else 0


def _pipeline(args: argparse.Namespace, settings: StackSettings) -> int:
    from lineage_assets.main_run import PipelineError, run_pipeline

    try:
        return 0 if run_pipeline(settings, orders=args.orders) else 1
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lineage-lab", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    stack = sub.add_parser("stack", help="the embedded stack of services")
    stack_sub = stack.add_subparsers(dest="action", required=True)
    up = stack_sub.add_parser("up", help="start services in order (all by default)")
    up.add_argument("services", nargs="*", help="only these services (and nothing else)")
    stack_sub.add_parser("down", help="stop every service lineage-lab started")
    stack_sub.add_parser("status", help="port, pid and health of each service")
    logs = stack_sub.add_parser("logs", help="tail service logs")
    logs.add_argument("service", nargs="?")
    logs.add_argument("-n", "--lines", type=int, default=50)
    logs.add_argument("-f", "--follow", action="store_true")

    service = sub.add_parser("service", help="one service in the foreground: a container's main process")
    service_sub = service.add_subparsers(dest="action", required=True)
    service_actions = (("run", "prepare, start and provision it; exit when it exits"), ("health", "exit 0 when ready"))
    for action, text in service_actions:
        service_sub.add_parser(action, help=text).add_argument("service")

    arts = sub.add_parser("artifacts", help="JVM artifacts from infra/artifacts.toml")
    arts_sub = arts.add_subparsers(dest="action", required=True)
    res = arts_sub.add_parser("resolve", help="resolve bundles from Maven Central into the cache")
    res.add_argument("bundles", nargs="*")
    arts_sub.add_parser("list", help="bundles, their artifacts, and whether they are resolved")

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
        "backfill): REF as the report names it in [brackets]; its rows then leave the balance; repeatable",
    )
    rec.add_argument(
        "--confirm-after",
        type=float,
        default=25.0,
        help="seconds before a streaming hop that "
        "looks lost or doubled is read again at the next checkpoint (0: report the first look)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = StackSettings.from_env()
        handler = {
            "stack": _stack,
            "service": _service,
            "artifacts": _artifacts,
            "lineage": _lineage,
            "verify": _verify,
            "pipeline": _pipeline,
            "impact": _impact,
            "reconcile": _reconcile,
        }[args.command]
        return handler(args, settings)
    except (ServiceError, artifacts.ArtifactError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
