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
from infra.kafka_connection import KafkaConnection
from infra.services import build_stack, select
from infra.services.base import ServiceError, read_pid
from infra.settings import SettingsError, StackSettings
from lineage_assets import cli as app_cli  # the app's commands, mounted below the stack's


def _stack(args: argparse.Namespace, settings: StackSettings) -> int:
    services = build_stack(settings)
    external = settings.external()
    if args.action == "up":
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
            errors = app_cli.resume_flink_jobs(settings)
            for error in errors:
                print(f"  flink: {error}", file=sys.stderr)
            if errors:
                return 1
    elif args.action == "down":
        if "flink-jobmanager" not in external and any(s.name == "flink-jobmanager" and read_pid(s) for s in services):
            print("Suspending the pipeline's Flink jobs (savepoints; `stack up` resumes them)")
            try:
                app_cli.suspend_flink_jobs(settings)
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

    app_cli.add_commands(sub)  # lineage, pipeline, verify, impact, reconcile
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = StackSettings.from_env()
        handler = {
            "stack": _stack,
            "service": _service,
            "artifacts": _artifacts,
            **app_cli.HANDLERS,
        }[args.command]
        return handler(args, settings)
    except (ServiceError, artifacts.ArtifactError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
