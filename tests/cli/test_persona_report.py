"""The robustness report (passhat.results.robustness): a sweep of two scripted agents and
three personas, whose effects are known (passhat.infra.scripted_personas), reported per
agent and persona with the drop from tau2's own user, in text, markdown, CSV and JSON."""

from __future__ import annotations

import json
import re

from rich.console import Console

from passhat.cli import html_report, render, report_text
from passhat.results.report import build_report
from tests.runs import config, run_to_end

PERSONAS = ["skeptical:2", "incoherent:1", "impatient:3"]
# Airline tasks whose gold actions write on both tau2 versions (1.0.x's 2 and 9 only read:
# an agent that does nothing solves them), whose user ids the verifier asks for.
TASKS = ["7", "8", "17"]


async def test_a_persona_sweep_reports_pass_hat_k_and_the_paired_drop_per_agent_and_persona(client, sqlite_store):
    cfg = config(agent_models=["scripted/oracle", "scripted/verifier"], user_model="scripted/customer",
                 task_ids=TASKS, trials=2, user_personas=PERSONAS)
    summary = await run_to_end(client, sqlite_store, cfg)
    console = Console(record=True, width=160)
    console.print(render.summary_table(summary))  # the table `passhat run` ends with
    assert "scripted/customer [skeptical:2]" in console.export_text()
    report = build_report(sqlite_store, [cfg.run_id])
    found = {(r.agent_model, r.user_persona): r for r in report.robustness}
    assert set(found) == {(a, p) for a in cfg.agent_models for p in PERSONAS}
    for persona in PERSONAS:  # the oracle acts whatever the user says
        oracle = found[("scripted/oracle", persona)]
        assert oracle.drop["2"].value == 0.0 and oracle.broken_tasks == [] and oracle.shared_tasks == 3
    # The verifier asks twice for the user id: withheld until a third ask, it never acts;
    # in fragments of three words it has it by the second; asked once, the impatient
    # customer (intensity 3) leaves.
    skeptical = found[("scripted/verifier", "skeptical:2")]
    assert skeptical.pass_hat_k["2"].value == 0.0 and skeptical.baseline_pass_hat_k["2"].value == 1.0
    assert skeptical.drop["2"].model_dump() == {"value": 1.0, "low": 1.0, "high": 1.0}
    assert skeptical.broken_tasks == TASKS
    assert found[("scripted/verifier", "incoherent:1")].broken_tasks == []
    assert found[("scripted/verifier", "impatient:3")].broken_tasks == TASKS

    console = Console(record=True, width=80)
    report_text.report_table(report, "model", console)
    table = console.export_text()
    assert "robustness to user personas" in table
    assert max(map(len, table.splitlines())) <= 80
    assert ("scripted/verifier [skeptical:2] on airline "
            "pass^2 0.000 [0.000, 0.000] vs 1.000 [1.000, 1.000] under tau2's user "
            "drop +1.000 [+1.000, +1.000] over 3 tasks pass^1 drop +1.000 [+1.000, +1.000] "
            "breaks 3 task(s): 7, 8, 17") in " ".join(table.split())
    console = Console(record=True, width=80)
    report_text.report_table(report, "task", console)
    by_task = " ".join(console.export_text().split())
    assert "this persona breaks 3 task(s): 7, 8, 17" in by_task and "this persona breaks no task" in by_task
    markdown = report_text.report_markdown(report, "model")
    assert "## Robustness to user personas" in markdown and "- **scripted/verifier [skeptical:2] on airline**" in markdown
    csv_lines = report_text.report_csv(report, "model").splitlines()
    assert csv_lines[0].startswith("run_id,agent_model,user_model,user_persona,domain,")
    assert len(csv_lines) == 1 + 2 * 4
    page = html_report.render(report, {r.run_id: html_report.trial_views(sqlite_store, r, None, "default", "")
                                       for r in report.runs})
    assert '<section id="personas"><h2>Robustness to user personas</h2>' in page
    assert "<td>+1.000<br><small>+1.000 – +1.000</small></td><td>3</td><td class=\"l\">7, 8, 17</td>" in page
    # Every cell of the task x trial grids opens its trial, a persona's too.
    grid = page[page.index('<section id="grid">'):]
    links = set(re.findall(r'href="#([^"]+)"', grid[:grid.index("</section>")]))
    assert len(links) == 2 * 4 * 3 * 2 and all(f'id="{a}"' in page for a in links)
    as_json = json.loads(report.model_dump_json())
    assert len(as_json["robustness"]) == 6 and as_json["runs"][0]["groups"][1]["user_persona"] == "skeptical:2"


async def test_a_persona_sweep_exports_a_tau2_file_per_user_and_names_the_persona_per_line(client, sqlite_store, tmp_path):
    from passhat.results.exporting import export_run

    cfg = config(task_ids=["2"], trials=1, user_model="scripted/customer", user_personas=["impatient:3"])
    await run_to_end(client, sqlite_store, cfg)
    [trial] = [t for t in sqlite_store.trials(cfg.run_id) if t.user_persona]
    console = Console(record=True, width=200)
    render.transcript(trial, sqlite_store.steps(trial.trial_id), console)  # `passhat show`
    assert "user scripted/customer, persona impatient:3, domain airline" in console.export_text()
    export_run(sqlite_store, cfg.run_id, "tau2", str(tmp_path / "tau2"))
    files = sorted(p.name for p in (tmp_path / "tau2").iterdir())
    assert files == [f"{cfg.run_id}__scripted_oracle__airline.json",
                     f"{cfg.run_id}__scripted_oracle__impatient_3__airline.json"]
    for name in files:
        assert len(json.loads((tmp_path / "tau2" / name).read_text())["simulations"]) == 1
    export_run(sqlite_store, cfg.run_id, "jsonl", str(tmp_path / "jsonl"))
    [lines] = [p.read_text().splitlines() for p in (tmp_path / "jsonl").iterdir()]
    assert sorted(json.loads(line).get("user_persona", "-") for line in lines) == ["-", "impatient:3"]
