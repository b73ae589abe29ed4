"""The stack's Dagster driven as its UI drives it: the webserver's GraphQL mutations that its sensor, schedule and
launchpad pages send, for tests that hold a sensor or a schedule still, or launch a run as the daemon would. A
mutation works on the code location the webserver has loaded; the `dagster` CLI used before loaded it anew in a
process of its own on every call (about 5 s each, some 25 calls a suite)."""

from __future__ import annotations

import requests

from infra.settings import StackSettings

#: the project's code location and its one repository, as the webserver names them
LOCATION = {"repositoryLocationName": "lineage_assets", "repositoryName": "__repository__"}
TIMEOUT_S = 60


def graphql(settings: StackSettings, query: str, **variables: object) -> dict:
    """The data of one GraphQL request to the stack's webserver; its errors raise with their own words."""
    resp = requests.post(
        f"{settings.dagster_url}/graphql", json={"query": query, "variables": variables}, timeout=TIMEOUT_S
    )
    resp.raise_for_status()
    body = resp.json()
    if body.get("errors"):
        raise RuntimeError(f"Dagster's GraphQL answered errors: {body['errors']}")
    return body["data"]


def _ok(data: dict, field: str, *success: str) -> dict:
    """``data[field]`` when its type is one of ``success``; otherwise a RuntimeError with what Dagster said."""
    answer = data[field]
    if answer.get("__typename") not in success:
        raise RuntimeError(f"{field} failed: {answer}")
    return answer


def _sensor_id(settings: StackSettings, name: str) -> str:
    query = "query ($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename ... on Sensor { id } } }"
    return _ok(graphql(settings, query, s={**LOCATION, "sensorName": name}), "sensorOrError", "Sensor")["id"]


def stop_sensor(settings: StackSettings, name: str) -> None:
    query = """mutation ($id: String!) { stopSensor(id: $id) { __typename
      ... on PythonError { message } ... on UnauthorizedError { message } } }"""
    _ok(graphql(settings, query, id=_sensor_id(settings, name)), "stopSensor", "StopSensorMutationResult")


def start_sensor(settings: StackSettings, name: str) -> None:
    query = """mutation ($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
      ... on PythonError { message } ... on UnauthorizedError { message } } }"""
    _ok(graphql(settings, query, s={**LOCATION, "sensorName": name}), "startSensor", "Sensor")


def set_sensor_cursor(settings: StackSettings, name: str, cursor: str) -> None:
    query = """mutation ($s: SensorSelector!, $c: String) { setSensorCursor(sensorSelector: $s, cursor: $c) {
      __typename ... on PythonError { message } ... on UnauthorizedError { message } } }"""
    _ok(graphql(settings, query, s={**LOCATION, "sensorName": name}, c=cursor), "setSensorCursor", "Sensor")


def stop_schedule(settings: StackSettings, name: str) -> None:
    found = """query ($s: ScheduleSelector!) {
      scheduleOrError(scheduleSelector: $s) { __typename ... on Schedule { id } } }"""
    schedule = _ok(graphql(settings, found, s={**LOCATION, "scheduleName": name}), "scheduleOrError", "Schedule")
    query = """mutation ($id: String!) { stopRunningSchedule(id: $id) { __typename
      ... on PythonError { message } ... on UnauthorizedError { message } } }"""
    _ok(graphql(settings, query, id=schedule["id"]), "stopRunningSchedule", "ScheduleStateResult")


def start_schedule(settings: StackSettings, name: str) -> None:
    query = """mutation ($s: ScheduleSelector!) { startSchedule(scheduleSelector: $s) { __typename
      ... on PythonError { message } ... on UnauthorizedError { message } } }"""
    _ok(graphql(settings, query, s={**LOCATION, "scheduleName": name}), "startSchedule", "ScheduleStateResult")


def launch_run(settings: StackSettings, job: str, tags: dict[str, str] | None = None) -> str:
    """Submits a run of ``job`` (run config empty) to the stack's run queue, as the launchpad does; its run id."""
    query = """mutation ($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
      ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } ... on RunConfigValidationInvalid {
      errors { message } } ... on InvalidSubsetError { message } ... on PipelineNotFoundError { message } } }"""
    params = {
        "selector": {**LOCATION, "jobName": job},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
    }
    return _ok(graphql(settings, query, p=params), "launchRun", "LaunchRunSuccess")["run"]["runId"]
