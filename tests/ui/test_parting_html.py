"""The HTML report's "Where the trials part" and "Failure causes per model" sections, in
headless Chromium: for a flaky task, a passing and a failing trial side by side from one
step before the split, the split highlighted on both sides. The screenshot is kept as a
test artifact (test-artifacts/html-parting.png)."""

from __future__ import annotations

import re

from PIL import Image

from passhat.results.report import build_report
from passhat.testing.harness import passhat
from tests.helpers import cli_env
from tests.runs import config, run_to_end
from tests.ui.chromium import ARTIFACTS, chromium

SPLIT = (0xFF, 0xF3, 0xCD)  # the highlighted split step's background (.msg.split)


async def test_parting_points_side_by_side_in_a_browser(client, sqlite_store, tmp_path):
    cfg = config(agent_models=["scripted/faulty-0.5"], limit=6, trials=4)
    await run_to_end(client, sqlite_store, cfg)
    [group] = build_report(sqlite_store, [cfg.run_id]).runs[0].groups
    flaky = [t for t in group.task_results if t.divergence and t.divergence.kind == "flaky"]
    assert flaky
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    page = tmp_path / "report.html"
    result = passhat("report", cfg.run_id, "-o", "html", "--out", str(page), env=env)
    assert result.returncode == 0, result.stderr

    dom = chromium(["--dump-dom", page.as_uri()], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    sections = dict(re.findall(r'<section id="(\w+)"[^>]*>(.*?)</section>', dom.stdout, re.S))
    assert {"causes", "parting"} <= set(sections)
    for kind, n in group.failures.causes.items():
        assert f"<th>{kind}</th>" in sections["causes"] and f"<td>{n}</td>" in sections["causes"]
    partings = sections["parting"].split('<div class="parting">')[1:]
    assert len(partings) == sum(len(t.divergence.groups) for t in flaky)
    for task in flaky:
        for part in task.divergence.groups:
            shown = next(p for p in partings if part.trials[0] in p)
            assert part.sentence in shown
            passing, failing = shown.split('<div class="failing">')
            assert part.passing_trial in passing
            # Each side from one step before its split, the split highlighted.
            for side, step in ((passing, part.passing_step), (failing, part.steps[0])):
                numbers = [int(n) for n in re.findall(r'<span class="stepno">(\d+)</span>', side)]
                assert numbers[0] == step - 1 and step in numbers, (numbers, step)
                assert re.search(rf'class="msg [a-z]+ split"><span class="stepno">{step}</span>', side)

    # The sections as the browser draws them: both columns carry a highlighted split.
    head = page.read_text().split("<body>")[0]
    excerpt = tmp_path / "parting.html"
    excerpt.write_text(f'{head}<body><section id="causes">{sections["causes"]}</section>'
                       f'<section id="parting">{sections["parting"]}</section></body></html>')
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "html-parting.png"
    shot.unlink(missing_ok=True)
    taken = chromium([f"--screenshot={shot}", excerpt.as_uri()], tmp_path / "profile-shot")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        pixels = rgb.load()
        halves = [sum(1 for x in range(lo, hi, 4) for y in range(0, height, 4) if pixels[x, y] == SPLIT)
                  for lo, hi in ((0, width // 2), (width // 2, width))]
    assert min(halves) > 50, halves
