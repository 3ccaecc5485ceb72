"""What the figures' labels and panels say: the same words as the table, no panel without figures."""
from __future__ import annotations

import pytest

from experiments import metrics, plots
from experiments.record import FlowRecord, LinkRecord
from tests.experiments.test_run_results import made_up


@pytest.fixture
def drawn(monkeypatch):
    """The matplotlib figure a drawing function made, instead of its PNG."""
    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, title, fontsize=13: figures.append(fig) or path)
    yield figures
    for fig in figures:
        plots.plt.close(fig)


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_recovery_bars_say_dash_when_nothing_failed_and_n_a_only_for_a_failure_without_goodput_before(drawn, tmp_path):
    calm = metrics.summarise(made_up(variant="no loss"))
    later = metrics.summarise(made_up(variant="later", fault_at=0.002))
    at_start = metrics.summarise(made_up(variant="from the start", fault_at=0.0))
    plots.completion_figure([calm, later, at_start], {"MRC": "red"}, tmp_path / "c.png", "t")
    recovery = drawn[0].axes[1]
    assert recovery.get_title().startswith("time until goodput is back to 90 %")
    assert texts(recovery) == ["-", "0 s", "n/a"]


def test_every_retransmission_cause_drawn_has_a_legend_entry_and_no_other(drawn, tmp_path):
    sack = metrics.summarise(made_up(transport_stats={"retx_sack": 5, "retx_timeout": 2}))
    plots.completion_figure([sack], {"MRC": "red"}, tmp_path / "c.png", "t")
    labels = [t.get_text() for t in drawn[0].axes[-1].get_legend().get_texts()]
    assert labels == ["MRC", "cause: timeout", "cause: sack"]


def incast(backend: str, links: list) -> object:
    record = made_up(backend, workload="incast", links=links)
    record.flows = [FlowRecord("h1", "h3", 1000, role="incast", received_bytes=1000, finish=0.004),
                    FlowRecord("h2", "h3", 1000, role="victim", received_bytes=None, finish=0.004)]
    return record


def test_flows_figure_draws_no_link_panel_when_no_record_measured_its_links(drawn, tmp_path):
    plots.flows_figure([incast("htsim", [])], {"MRC": "red"}, tmp_path / "f.png", "t")
    (flows,) = drawn[0].axes
    assert "link utilisation not measured by the backend" in flows.get_title()
    plots.flows_figure([incast("netsim", [LinkRecord("s1-s3", 1e9, 500)])], {"MRC": "red"}, tmp_path / "g.png", "t")
    flows, links = drawn[1].axes
    assert links.get_title() == "v: switch-to-switch link utilisation" and "not measured" not in flows.get_title()
