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


def test_recovery_panel_says_n_a_only_for_a_failure_without_goodput_before_and_no_dip_for_one_without_a_dip(drawn, tmp_path):
    calm = metrics.summarise(made_up(variant="no loss"))
    later = metrics.summarise(made_up(variant="later", fault_at=0.002))
    at_start = metrics.summarise(made_up(variant="from the start", fault_at=0.0))
    plots.completion_figure([calm, later, at_start], {"MRC": "red"}, tmp_path / "c.png", "t")
    recovery = drawn[0].axes[1]
    assert recovery.get_title().startswith("time until goodput is back to 90 %")
    # no case has a recovery time (the later fault's goodput never dipped): the panel says why in
    # words, each reason once, and draws no "0 s" bar
    (said,) = texts(recovery)
    assert said.startswith("n/a: no goodput before the failure") and "\n\nno dip: goodput never fell below 90 %" in said
    assert "0 s" not in said
    # with a case that has a time, bars: "-" where nothing failed, the time, "n/a" for a fault from the start
    dip = made_up(variant="dip", fault_at=0.001, end=0.006, completion_time=0.006)
    dip.samples = [[0, [0]], [0.001, [1000]], [0.002, [1000]], [0.003, [2000]], [0.004, [3000]],
                   [0.005, [4000]], [0.006, [5000]]]                  # nothing arrives for a millisecond
    plots.completion_figure([calm, metrics.summarise(dip), at_start], {"MRC": "red"}, tmp_path / "d.png", "t")
    assert texts(drawn[1].axes[1]) == ["-", "1 ms", "n/a"]


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


def ev_set(conn: str, paths: int) -> dict:
    """An `ev_set` record of a connection with two EVs on each of `paths` paths."""
    return {"kind": "ev_set", "t": 0.004, "conn": conn,
            "evs": [{"ev": 10 * p + i, "path": p, "dst": f"{p:032x}"} for p in range(paths) for i in range(2)]}


def ev_state(conn: str, ev: int, path: int, new: str, t: float = 0.001) -> dict:
    return {"kind": "ev_state", "t": t, "conn": conn, "ev": ev, "path": path, "dst": f"{path:032x}",
            "old": "GOOD", "new": new}


def test_the_ev_timeline_without_a_change_of_state_draws_a_connection_with_several_paths_and_says_why(drawn, tmp_path):
    # the run's first connection has one path: loss never retires it, so its panel would say nothing
    quiet = made_up(ev_events=[ev_set("h1->h2", 1), ev_set("h1->h3", 2), ev_set("h2->h4", 4), ev_set("h3->h4", 4)])
    assert plots.drawn_connection(quiet) == ("h2->h4", "no EV changed state: the first connection with the most paths (4)")
    plots.ev_state_figure([quiet], tmp_path / "e.png", "t")
    (panel,) = drawn[0].axes
    assert "connection h2->h4" in panel.get_title()
    assert "(no EV changed state: the first connection with the most paths (4))" in panel.get_title()
    assert len(panel.get_yticks()) == 4                    # a row of EVs per path


def test_the_ev_timeline_prefers_retirements_then_paths_over_state_changes():
    sets = [ev_set("h1->h2", 1), ev_set("h1->h3", 2), ev_set("h1->h4", 2)]
    busy_single = [ev_state("h1->h2", 0, 0, "SKIP")] * 3 + [ev_state("h1->h4", 0, 0, "SKIP")]
    conn, why = plots.drawn_connection(made_up(ev_events=busy_single + sets))
    assert conn == "h1->h4" and why.startswith("no EV retired: of the connections with the most paths (2)")
    assert why.endswith("the one with most state changes (1)")
    conn, why = plots.drawn_connection(made_up(ev_events=[ev_state("h1->h2", 0, 0, "SKIP")] + sets))
    assert conn == "h1->h3" and "none of a connection with 2 paths changed state" in why
    retired = [ev_state("h1->h3", 10, 1, "ASSUMED_BAD"), ev_state("h1->h4", 10, 1, "ASSUMED_BAD"),
               ev_state("h1->h4", 11, 1, "ASSUMED_BAD")]
    assert plots.drawn_connection(made_up(ev_events=busy_single + retired + sets)) == \
        ("h1->h4", "the connection with most EVs retired (2)")
