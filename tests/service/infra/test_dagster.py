import requests

QUERY = """{ workspaceOrError { __typename ... on Workspace { locationEntries { name
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def test_dagster_ui_serves_the_code_location(settings):
    resp = requests.post(f"http://{settings.host}:{settings.dagster_port}/graphql", json={"query": QUERY}, timeout=30)
    resp.raise_for_status()
    entries = resp.json()["data"]["workspaceOrError"]["locationEntries"]
    loaded = {e["name"]: e["locationOrLoadError"]["__typename"] for e in entries}
    assert loaded == {"lineage_assets": "RepositoryLocation"}, entries
