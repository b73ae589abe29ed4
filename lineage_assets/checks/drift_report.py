"""The drift report: Dagster's graph (the identity module, which the assets are built from) side by side with what
Marquez holds, at table and column level, plus a self-contained HTML picture of that graph. Each difference says
whether the project's own events (the outbox) show it too ("as sent") or only Marquez does.

Used by ``lineage-lab verify`` (exit 1 on drift) and the ``verify_lineage`` Dagster job.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from infra.settings import StackSettings
from lineage_assets.checks import compare
from lineage_assets.checks.engine_lineage import AccountReader, checked_jobs, judge, readers
from lineage_assets.checks.graph import Identity, LineageGraph
from lineage_assets.checks.marquez_graph import from_marquez
from lineage_assets.connect.client import ConnectClient
from lineage_assets.flink.client import FlinkClient
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.outbox import Outbox


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    #: jobs whose engine could not be asked: not drift, and not agreement either
    unknown: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.drift

    def text(self) -> str:
        verdict = (
            "no drift" if self.ok else f"{len(self.drift)} difference(s):\n" + "\n".join(f"  - {d}" for d in self.drift)
        )
        if self.unknown:
            verdict += f"\n{len(self.unknown)} job(s) unknown (their engine was not read):\n" + "\n".join(
                f"  - {u}" for u in self.unknown
            )
        return "\n".join([*self.lines, "", verdict])


def _ident(identity: Identity) -> str:
    return f"{identity[0]}/{identity[1]}"


def expected_column_edges(pipeline: Pipeline) -> set[tuple[Identity, str, Identity, str]]:
    """(input dataset, input column, output dataset, output column) for every column edge the pipeline declares."""
    edges = set()
    for job in pipeline.jobs.values():
        for out_key, columns in job.column_lineage.items():
            out = pipeline.dataset(out_key)
            for column, sources in columns.items():
                for src in sources:
                    ds = pipeline.dataset(src.dataset)
                    edges.add(((ds.namespace, ds.name), src.column, (out.namespace, out.name), column))
    return edges


def waiting_for_the_source(pipeline: Pipeline, graph: LineageGraph, edges: set) -> set:
    """The declared edges from an optional column that the input dataset in the graph does not have yet (the source
    team has not added it): not drift, they appear once the source has the column."""
    waiting = set()
    for edge in edges:
        ds, node = pipeline.by_identity(*edge[0]), graph.datasets.get(edge[0])
        if ds and node and edge[1] in ds.column_names and ds.column(edge[1]).optional and edge[1] not in node.fields:
            waiting.add(edge)
    return waiting


def actual_column_edges(graph: LineageGraph) -> set[tuple[Identity, str, Identity, str]]:
    return {
        (src, src_col, node.identity, column)
        for node in graph.datasets.values()
        for column, sources in node.column_sources.items()
        for src, src_col in sources
    }


def engine_section(pipeline: Pipeline, read: AccountReader, report: Report) -> None:
    """Each job's account, asked of its engine now, held to the declaration: differences are drift, an account that
    cannot be read is listed as unknown (the comparison did not happen; it is not called agreement)."""
    report.lines.append("")
    report.lines.append("ENGINES: what each job reads and writes as its engine says now, against the declaration")
    for name in checked_jobs(pipeline):
        job = pipeline.job(name)
        agrees, sentence, found = judge(pipeline, job, read(job))
        mark = {True: "ok", False: "DRIFT", None: "UNKNOWN"}[agrees]
        report.lines.append(f"  {name:<24} {mark}: {sentence}")
        report.drift += found
        if agrees is None:
            report.unknown.append(f"{name}: {sentence}")


def verify(pipeline: Pipeline, graph: LineageGraph) -> Report:
    report = Report()
    width = 58
    report.lines.append(f"{'JOB (Dagster / identity module)':<{width}} LINEAGE GRAPH")
    for job in pipeline.jobs.values():
        node = graph.jobs.get((job.namespace, job.name))
        ins = {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in job.inputs}
        outs = {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in job.outputs}
        left = f"{job.name} [{job.processing_type}]"
        right = "MISSING" if node is None else f"{job.name} [{node.processing_type}] latest run {node.latest_state}"
        report.lines.append(f"  {left:<{width - 2}} {right}")
        if node is None:
            report.drift.append(f"job {job.namespace}/{job.name} is not in the lineage graph")
            continue
        have_in, have_out = graph.io_with_children(node.identity)
        for label, want, have in (("input", ins, have_in), ("output", outs, have_out)):
            for identity in sorted(want | have):
                mark = "=" if identity in want and identity in have else ("missing" if identity in want else "extra")
                report.lines.append(f"      {label} {_ident(identity):<{width - 14}} {mark}")
                if mark != "=":
                    report.drift.append(f"job {job.name}: {mark} {label} {_ident(identity)}")
    report.lines.append("")
    report.lines.append("DATASETS")
    for ds in pipeline.datasets.values():
        for finding in (
            compare.dataset_exists(graph, ds),
            compare.schema_matches(graph, ds),
            compare.no_second_identity(graph, ds),
        ):
            report.lines.append(f"  {ds.node_id:<{width}} {'ok' if finding.passed else 'DRIFT'}: {finding.message}")
            if not finding.passed:
                report.drift.append(finding.message)
    want, have = expected_column_edges(pipeline), actual_column_edges(graph)
    # column lineage is compared where it is declared: an output without declared column lineage (a dead-letter
    # topic) shows what its engine reports, and the engine section names any output that is not declared at all
    declared_outputs = {edge[2] for edge in want}
    have = {edge for edge in have if edge[2] in declared_outputs}
    waiting = waiting_for_the_source(pipeline, graph, want) - have
    want -= waiting
    report.lines.append("")
    report.lines.append(f"COLUMN LINEAGE: {len(want)} declared edges, {len(have)} in the lineage graph")
    if waiting:
        columns = sorted({f"{_ident(e[0])}.{e[1]}" for e in waiting})
        report.lines.append(f"  {len(waiting)} more wait for optional columns the source does not have yet: {columns}")
    for edge in sorted(want - have):
        report.drift.append(f"missing column edge {_ident(edge[0])}.{edge[1]} -> {_ident(edge[2])}.{edge[3]}")
    for edge in sorted(have - want):
        report.drift.append(f"extra column edge {_ident(edge[0])}.{edge[1]} -> {_ident(edge[2])}.{edge[3]}")
    return report


def render_html(graph: LineageGraph, report: Report, title: str = "lineage-lab: lineage graph") -> str:
    """Jobs and datasets laid out left to right by depth, edges as SVG lines, column edges as a table."""
    nodes: dict[str, tuple[str, str]] = {}  # id -> (label, second line)
    edges: list[tuple[str, str]] = []
    for job in graph.jobs.values():
        jid = f"job:{_ident(job.identity)}"
        nodes[jid] = (job.identity[1], f"job {job.identity[0]} | {job.latest_state or '?'}")
        for i in sorted(job.inputs):
            nodes.setdefault(f"ds:{_ident(i)}", (i[1], i[0]))
            edges.append((f"ds:{_ident(i)}", jid))
        for o in sorted(job.outputs):
            nodes.setdefault(f"ds:{_ident(o)}", (o[1], o[0]))
            edges.append((jid, f"ds:{_ident(o)}"))
    depth = {n: 0 for n in nodes}
    for _ in range(len(nodes)):
        for a, b in edges:
            depth[b] = max(depth[b], depth[a] + 1)
    columns: dict[int, list[str]] = {}
    for n in sorted(nodes):
        columns.setdefault(depth[n], []).append(n)
    box_w, box_h, gap_x, gap_y = 260, 44, 50, 22
    pos = {
        n: (20 + d * (box_w + gap_x), 20 + i * (box_h + gap_y)) for d, col in columns.items() for i, n in enumerate(col)
    }
    width = 40 + (max(columns, default=0) + 1) * (box_w + gap_x)
    height = 40 + max((len(c) for c in columns.values()), default=1) * (box_h + gap_y)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">']
    svg.append(
        '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>'
    )
    for a, b in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        svg.append(
            f'<line x1="{x1 + box_w}" y1="{y1 + box_h / 2}" x2="{x2}" y2="{y2 + box_h / 2}" stroke="#555" '
            'marker-end="url(#a)"/>'
        )
    for n, (x, y) in pos.items():
        fill = "#dbe9ff" if n.startswith("job:") else "#e8f6e8"
        svg.append(f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="6" fill="{fill}" stroke="#333"/>')
        label, second = nodes[n]
        svg.append(f'<text x="{x + 6}" y="{y + 18}" font-size="12" font-weight="bold">{html.escape(label[:38])}</text>')
        svg.append(f'<text x="{x + 6}" y="{y + 35}" font-size="10" fill="#444">{html.escape(second[:46])}</text>')
    svg.append("</svg>")
    rows = "".join(
        f"<tr><td>{html.escape(_ident(s))}.{html.escape(sc)}</td><td>{html.escape(_ident(o))}.{html.escape(oc)}</td></tr>"
        for s, sc, o, oc in sorted(actual_column_edges(graph))
    )
    verdict = "no drift" if report.ok else "<br>".join(html.escape(d) for d in report.drift)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1><p><b>Drift:</b> {verdict}</p>{''.join(svg)}"
        f"<h2>Column lineage ({len(actual_column_edges(graph))} edges)</h2>"
        f"<table border='1' cellpadding='3'><tr><th>from</th><th>to</th></tr>{rows}</table></body></html>"
    )


def picture_path(settings: StackSettings) -> Path:
    """Where the drift report's picture goes by default: under the stack's data directory."""
    return settings.data_dir / "lineage" / "graph.html"


def verify_and_render(settings: StackSettings, picture: Path | None = None):
    """``verify_lineage`` for the deployment these settings describe (the command line's and the main job's way in):
    Marquez, the outbox and the engines of the settings, the picture at ``picture`` or ``picture_path(settings)``."""
    return verify_lineage(
        Pipeline.from_settings(settings),
        MarquezClient(settings.marquez_url, api_key=settings.marquez_api_key or None),
        settings.lineage_outbox,
        picture or picture_path(settings),
        Engines(FlinkClient(settings), ConnectClient(settings.connect_url), KafkaConnection.from_settings(settings)),
    )


@dataclass(frozen=True)
class Engines:
    """The engines ``verify_lineage`` asks for each job's account (Spark's is read from the Marquez graph)."""

    flink: FlinkClient
    connect: ConnectClient
    kafka: KafkaConnection


def verify_lineage(
    pipeline: Pipeline, marquez: MarquezClient, outbox: Path, picture: Path, engines: Engines | None = None
):
    """Verify the deployment's lineage as Marquez holds it, and each job's account as its engine gives it now, and
    write the picture; returns (report, picture path). Without ``engines`` the engine section says why it is missing.

    Raises ``MarquezError`` when Marquez cannot be read."""
    graph = from_marquez(marquez, pipeline)
    report = verify(pipeline, graph)
    if engines is None:
        read = readers(pipeline, None, None, None, lambda: (graph, marquez.url))
    else:
        read = readers(pipeline, engines.flink, engines.connect, engines.kafka, lambda: (graph, marquez.url))
    engine_section(pipeline, read, report)
    box = Outbox(outbox)
    counts = box.counts()
    report.lines[:0] = [
        f"LINEAGE GRAPH: Marquez at {marquez.url}; outbox: {counts.sent} sent, {counts.queued} queued "
        f"(oldest {counts.backlog_age:.0f} s), {counts.rejected} rejected",
        "",
    ]
    if report.drift:
        as_sent = set(verify(pipeline, LineageGraph.from_events(box.events(("sent",)))).drift)
        report.drift = [
            f"{d} ({'as sent: the project emitted it so' if d in as_sent else 'Marquez only: the events sent differ'})"
            for d in report.drift
        ]
    picture.parent.mkdir(parents=True, exist_ok=True)
    picture.write_text(render_html(graph, report))
    return report, picture
