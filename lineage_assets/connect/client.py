"""A small typed client of Kafka Connect's REST API: validate, deploy idempotently, inspect, pause, resume."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import requests


class ConnectError(RuntimeError):
    """Kafka Connect refused a request or cannot be reached; the message says which and what to do."""


@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: str  # RUNNING, FAILED, PAUSED, UNASSIGNED, RESTARTING
    worker: str
    trace: str | None


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    state: str
    worker: str
    tasks: tuple[TaskStatus, ...]

    @property
    def failed_tasks(self) -> tuple[TaskStatus, ...]:
        return tuple(t for t in self.tasks if t.state == "FAILED")


class ConnectClient:
    def __init__(self, url: str, timeout: float = 15.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            return self._session.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise ConnectError(
                f"Kafka Connect at {self.url} is unreachable ({exc.__class__.__name__}); "
                "is the stack up? (`lineage-lab stack status`)"
            ) from exc

    @staticmethod
    def _check(resp: requests.Response, what: str) -> requests.Response:
        if resp.status_code >= 400:
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise ConnectError(f"{what}: HTTP {resp.status_code}: {message}")
        return resp

    def validate(self, config: dict[str, str]) -> list[str]:
        """Connect's own validation of a connector config: one message per invalid key (empty when valid)."""
        cls = config.get("connector.class", "")
        plugin = cls.rsplit(".", 1)[-1]
        resp = self._check(
            self._call("PUT", f"/connector-plugins/{plugin}/config/validate", json=config),
            f"validating the config of {config.get('name', cls)}",
        )
        errors = []
        for item in resp.json().get("configs", []):
            value = item.get("value", {})
            errors += [f"{value.get('name')}: {e}" for e in value.get("errors", [])]
        return errors

    def deploy(self, name: str, config: dict[str, str]) -> Literal["created", "updated", "unchanged"]:
        """Create or update a connector; an unchanged config is left alone (no task restart)."""
        wanted = {**config, "name": name}
        errors = self.validate(wanted)
        if errors:
            raise ConnectError(invalid_config_message(name, errors))
        current = self.config(name)
        if current == wanted:
            return "unchanged"
        self._check(self._call("PUT", f"/connectors/{name}/config", json=wanted), f"deploying connector {name!r}")
        return "created" if current is None else "updated"

    def config(self, name: str) -> dict[str, str] | None:
        resp = self._call("GET", f"/connectors/{name}/config")
        if resp.status_code == 404:
            return None
        return self._check(resp, f"reading connector {name!r}").json()

    def status(self, name: str) -> ConnectorStatus | None:
        resp = self._call("GET", f"/connectors/{name}/status")
        if resp.status_code == 404:
            return None
        body = self._check(resp, f"status of connector {name!r}").json()
        return ConnectorStatus(
            name=body["name"],
            state=body["connector"]["state"],
            worker=body["connector"].get("worker_id", ""),
            tasks=tuple(
                TaskStatus(t["id"], t["state"], t.get("worker_id", ""), t.get("trace"))
                for t in sorted(body.get("tasks", []), key=lambda t: t["id"])
            ),
        )

    def pause(self, name: str) -> None:
        self._check(self._call("PUT", f"/connectors/{name}/pause"), f"pausing connector {name!r}")

    def resume(self, name: str) -> None:
        self._check(self._call("PUT", f"/connectors/{name}/resume"), f"resuming connector {name!r}")

    def restart(self, name: str, failed_only: bool = True) -> None:
        params = {"includeTasks": "true", "onlyFailed": str(failed_only).lower()}
        self._check(self._call("POST", f"/connectors/{name}/restart", params=params), f"restarting {name!r}")

    def delete(self, name: str) -> None:
        resp = self._call("DELETE", f"/connectors/{name}")
        if resp.status_code != 404:
            self._check(resp, f"deleting connector {name!r}")


#: Connect's validation error for a connector requiring exactly-once delivery on a worker without it (KIP-618)
_NO_EXACTLY_ONCE = "exactly.once.support: This worker does not have exactly-once source support enabled"


def invalid_config_message(name: str, errors: list[str]) -> str:
    """Connect's validation errors, plus what to do about the one a running worker's own config causes: a worker
    started before its config enabled exactly-once source support (an older checkout's stack) still runs without it."""
    message = f"connector {name!r} config is invalid: " + "; ".join(errors)
    if any(e.startswith(_NO_EXACTLY_ONCE) for e in errors):
        message = message.rstrip(".") + (
            ". The connector writes its records and source offsets in Kafka transactions, which every worker of the "
            "Connect cluster must allow: set exactly.once.source.support=enabled in each worker's config and restart "
            "the workers (the embedded stack's worker reads it from infra/templates/connect-distributed.properties: "
            "`lineage-lab stack down && lineage-lab stack up`)"
        )
    return message
