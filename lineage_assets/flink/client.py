"""A small typed client of Flink's REST API (jobs, their state, cancel) plus submission through Flink's CLI."""

import re
from dataclasses import dataclass
from pathlib import Path

import requests

from infra.services.flink import flink_cli, job_jar_archive, job_jars, openlineage_events_file, order_functions_jar
from infra.settings import StackSettings

ACTIVE = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "RECONCILING")
_SAVEPOINT = re.compile(r"Savepoint completed\. Path: (\S+)")


class FlinkError(RuntimeError):
    """Flink refused a request or cannot be reached; the message says which and what to do."""


@dataclass(frozen=True)
class FlinkJob:
    jid: str
    name: str
    state: str
    start_time_ms: int


class FlinkClient:
    def __init__(self, settings: StackSettings, timeout: float = 10.0) -> None:
        self.settings = settings
        self.url = settings.flink_rest_url
        self.timeout = timeout

    def _request(self, method: str, path: str, **kwargs) -> requests.Response:
        try:
            resp = requests.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise FlinkError(
                f"Flink at {self.url} is unreachable ({exc.__class__.__name__}); is the stack up?"
            ) from exc
        if resp.status_code >= 400 and resp.status_code != 404:
            raise FlinkError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:500]}")
        return resp

    def _get(self, path: str, missing_ok: bool = False) -> dict | None:
        resp = self._request("GET", path)
        if resp.status_code == 404:
            if missing_ok:
                return None
            raise FlinkError(f"GET {path}: HTTP 404: {resp.text[:500]}")
        return resp.json()

    @staticmethod
    def _as_job(body: dict) -> FlinkJob:
        return FlinkJob(body["jid"], body["name"], body["state"], body.get("start-time", 0))

    def jobs(self) -> list[FlinkJob]:
        return [self._as_job(j) for j in self._get("/jobs/overview")["jobs"]]

    def active(self, name: str) -> FlinkJob | None:
        """The job of that name that is not finished, if any (there must never be two)."""
        running = [j for j in self.jobs() if j.name == name and j.state in ACTIVE]
        return max(running, key=lambda j: j.start_time_ms) if running else None

    @staticmethod
    def current_of(jobs: list[FlinkJob], name: str) -> FlinkJob | None:
        """The job of that name a person means by "the job" now: the active one, else the newest (the cluster
        keeps finished jobs for a while); None when the cluster knows none."""
        named = sorted((j for j in jobs if j.name == name), key=lambda j: j.start_time_ms, reverse=True)
        return next((j for j in named if j.state in ACTIVE), named[0] if named else None)

    def current(self, name: str) -> FlinkJob | None:
        return self.current_of(self.jobs(), name)

    def named(self, name: str) -> list[FlinkJob]:
        """Every job of that name the cluster knows, newest first."""
        return sorted((j for j in self.jobs() if j.name == name), key=lambda j: j.start_time_ms, reverse=True)

    def job(self, jid: str) -> FlinkJob | None:
        """One job by id; None when the cluster does not know it (any more)."""
        body = self._get(f"/jobs/{jid}", missing_ok=True)
        return self._as_job(body) if body else None

    def failure_cause(self, jid: str) -> tuple[str, str] | None:
        """(message, stack trace) of the job's root exception, if it has one."""
        body = self._get(f"/jobs/{jid}/exceptions")
        trace = body.get("root-exception") or ""
        if not trace:
            history = (body.get("exceptionHistory") or {}).get("entries") or []
            trace = history[0].get("stacktrace", "") if history else ""
        return (trace.splitlines()[0], trace) if trace else None

    def record_counts(self, jid: str) -> tuple[int, int]:
        """(records the job read from its sources, records its sinks received), from Flink's task metrics."""
        body = self._get(f"/jobs/{jid}")
        vertices = body.get("vertices", [])
        if not vertices:
            return 0, 0
        source = vertices[0]
        read = self._get(f"/jobs/{jid}/vertices/{source['id']}/subtasks/metrics?get=numRecordsIn") or []
        records_in = int(sum(m.get("sum", 0) for m in read if m.get("id") == "numRecordsIn"))
        records_out = sum(v["metrics"].get("read-records", 0) for v in vertices if "Writer" in v["name"])
        return records_in, records_out

    def last_checkpoint(self, jid: str) -> dict | None:
        latest = (self._get(f"/jobs/{jid}/checkpoints").get("latest") or {}).get("completed")
        return latest or None

    def latest_state(self, jid: str) -> tuple[str, int] | None:
        """(external path, time in ms) of the job's newest savepoint or completed checkpoint, if Flink kept one."""
        latest = (self._get(f"/jobs/{jid}/checkpoints", missing_ok=True) or {}).get("latest") or {}
        found = [
            (c["external_path"], int(c.get("latest_ack_timestamp") or 0))
            for c in (latest.get("savepoint"), latest.get("completed"))
            if c and c.get("external_path") and c["external_path"] != "<checkpoint-not-externally-addressable>"
        ]
        return max(found, key=lambda f: f[1]) if found else None

    def cancel(self, jid: str) -> None:
        if self._request("PATCH", f"/jobs/{jid}", params={"mode": "cancel"}).status_code == 404:
            raise FlinkError(f"cancelling {jid}: Flink does not know this job")

    def user_config(self, jid: str) -> dict[str, str]:
        """The job's global job parameters (where a deployment records its version)."""
        return self._get(f"/jobs/{jid}/config").get("execution-config", {}).get("user-config", {})

    def listener_events_file(self) -> Path:
        """Where the OpenLineage Flink listener of this host's Flink CLI writes the events of a job it submits."""
        return openlineage_events_file(self.settings)

    def savepoint_dir(self, name: str = "") -> str:
        """Where this project puts savepoints on this cluster (one folder per job name, so a job's newest state
        can be found after the cluster forgot the job); empty: the cluster's own state.savepoints.dir."""
        base = self.settings.flink_savepoint_dir or (
            "" if self.settings.external_flink else f"file://{self.settings.data_dir / 'flink' / 'savepoints'}"
        )
        return f"{base.rstrip('/')}/{name}" if base and name else base

    def checkpoint_dir(self, name: str) -> str:
        """Where a job of that name retains its checkpoints on the stack's cluster (one folder per name); empty for
        another cluster, whose own execution.checkpointing.dir applies."""
        if self.settings.external_flink:
            return ""
        return f"file://{self.settings.data_dir / 'flink' / 'checkpoints'}/{name}"

    def _cli(self, action: str, *args: str, timeout: float, env: dict[str, str] | None = None):
        """Flink's CLI, whose hang (a cluster that accepts the connection and never answers) is a FlinkError that
        says what did not answer, never a wait without end."""
        import subprocess

        try:
            return flink_cli(self.settings, action, *args, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as exc:
            raise FlinkError(
                f"`flink {action}` against {self.settings.flink_rest_url} did not end in {timeout:.0f} s: check the "
                "JobManager (`lineage-lab stack status`, its log) and the job in the Flink UI, then try again"
            ) from exc

    def stop_with_savepoint(self, jid: str, timeout: float = 300.0, name: str = "") -> str:
        """Stop the job gracefully, taking a savepoint (under the job name's folder when ``name`` is given);
        returns the savepoint path."""
        directory = self.savepoint_dir(name)
        # an external cluster without a directory here uses its own state.savepoints.dir
        where = ["--savepointPath", directory] if directory else []
        result = self._cli("stop", *where, jid, timeout=timeout)
        found = _SAVEPOINT.search(result.stdout + result.stderr)
        if result.returncode != 0 or not found:
            raise FlinkError(f"stopping {jid} with a savepoint failed: {(result.stdout + result.stderr)[-1500:]}")
        return found.group(1)

    def submit_python(
        self,
        script: str,
        *args: str,
        py_files: tuple[str, ...] = (),
        savepoint: str | None = None,
        timeout: float = 300.0,
        env: dict[str, str] | None = None,
    ) -> str:
        """Submit a PyFlink script detached (from a savepoint if given), shipping ``py_files`` (modules the
        script imports) to the cluster's Python workers, and the connector jars to a cluster other than the
        stack's; ``env`` reaches the script's driver (secrets). Returns the job id Flink prints."""
        # -n: state of an operator the new version no longer has (e.g. the Python operators of the jobs before
        # their per-record path moved to the JVM) is dropped instead of refusing the upgrade; the Kafka sources
        # fall back to the offsets their group committed at the last checkpoint
        restore = ["-s", savepoint, "-n"] if savepoint else []
        ship = ["-pyfs", ",".join(py_files)] if py_files else []
        functions = order_functions_jar(self.settings)
        if functions is None:
            raise FlinkError(
                "the jobs' JVM functions are not built; run `lineage-lab artifacts resolve flink-order-functions` "
                "(Maven builds flink_jobs/order-functions) so they can be uploaded with the job"
            )
        upload = ["-j", str(functions)]  # the stack's cluster has the connectors in lib/
        if self.settings.external_flink:
            if not job_jars(self.settings):
                raise FlinkError(
                    "the Flink connector jars are not resolved; run `lineage-lab artifacts resolve flink-jars` so "
                    "they can be uploaded with the job"
                )
            # a job jar whose lib/ holds the connectors and the functions: the CLI uploads each (-D pipeline.jars
            # would be dropped)
            upload = ["-j", str(job_jar_archive(self.settings))]
        result = self._cli("run", "-d", *upload, *restore, *ship, "-py", script, *args, timeout=timeout, env=env)
        out = result.stdout + result.stderr
        marker = "Job has been submitted with JobID "
        if result.returncode != 0 or marker not in out:
            tail = "\n".join(out.strip().splitlines()[-15:])
            raise FlinkError(f"submitting {script} failed (exit {result.returncode}):\n{tail}")
        return out.split(marker, 1)[1].split()[0]
