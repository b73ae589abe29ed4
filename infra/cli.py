"""The stack's commands of ``lineage-lab``: run the embedded stack and resolve its artifacts.

lineage-lab stack up [SERVICE ...]       start (in order) what is not running; idempotent
lineage-lab stack down                   stop everything lineage-lab started, nothing else
lineage-lab stack status                 each service with port, pid and health
lineage-lab stack logs [SERVICE] [-n N] [-f]
lineage-lab service run|health SERVICE   one service in the foreground, as a container's main process
lineage-lab artifacts resolve|list       JVM artifacts of infra/artifacts.toml
"""

# The entry point is lineage_assets/cli.py: it mounts these commands, then the app's, and hands `stack up` /
# `stack down` the app's steps as StackHooks. infra imports nothing of the app; `python -m infra.cli` runs the stack's
# commands alone, without hooks.

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from infra import artifacts, supervisor
from infra.kafka_connection import KafkaConnection
from infra.services import build_stack, select
from infra.services.base import ServiceError, read_pid
from infra.settings import SettingsError, StackSettings

Handler = Callable[[argparse.Namespace, StackSettings], int]


@dataclass(frozen=True)
class StackHooks:
    """What ``stack up`` and ``stack down`` do for the app around the Flink services (absent: nothing)."""

    #: after the Flink services started: resume what ``before_flink_down`` suspended; the errors, if any
    on_flink_up: Callable[[StackSettings], list[str]] | None = None
    #: before a running Flink JobManager stops: suspend the jobs (a failure never blocks the stop)
    before_flink_down: Callable[[StackSettings], None] | None = None


def stack(args: argparse.Namespace, settings: StackSettings, hooks: StackHooks = StackHooks()) -> int:
    """``lineage-lab stack up|down|status|logs``."""
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
        flink_up = {"flink-jobmanager", "flink-taskmanager"} <= {s.name for s in chosen}
        if hooks.on_flink_up and flink_up:  # the jobs `stack down` suspended
            errors = hooks.on_flink_up(settings)
            for error in errors:
                print(f"  flink: {error}", file=sys.stderr)
            if errors:
                return 1
    elif args.action == "down":
        flink_running = any(s.name == "flink-jobmanager" and read_pid(s) for s in services)
        if hooks.before_flink_down and "flink-jobmanager" not in external and flink_running:
            print("Suspending the pipeline's Flink jobs (savepoints; `stack up` resumes them)")
            try:
                hooks.before_flink_down(settings)
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


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add the stack's commands (stack, service, artifacts) to a ``lineage-lab`` parser's subcommands."""
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


#: the stack's commands, by name; ``stack`` here without hooks
HANDLERS: dict[str, Handler] = {"stack": stack, "service": _service, "artifacts": _artifacts}


def parser(
    description: str | None = __doc__, more: Callable[[argparse._SubParsersAction], None] | None = None
) -> argparse.ArgumentParser:
    """The ``lineage-lab`` parser: the stack's commands, then those ``more`` adds."""
    p = argparse.ArgumentParser(
        prog="lineage-lab", description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    add_commands(sub)
    if more:
        more(sub)
    return p


def run(args: argparse.Namespace, handlers: dict[str, Handler]) -> int:
    """Run the parsed command with the environment's settings; the stack's errors exit 2, Ctrl-C 130."""
    try:
        return handlers[args.command](args, StackSettings.from_env())
    except (ServiceError, artifacts.ArtifactError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def main(argv: list[str] | None = None) -> int:
    """The stack's commands alone (``python -m infra.cli``); ``lineage-lab`` is lineage_assets.cli:main."""
    return run(parser().parse_args(argv), HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
