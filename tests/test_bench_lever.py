"""The rollouts-per-update speed lever's checks: its variant and table in ``bench training``, the CLI's filters, the loop timing."""

from __future__ import annotations

import math

import pytest

from workbench.bench.training import LEVER, LEVER_GRAPHS, TUNED, VARIANTS, _lever_markdown
from workbench.cli import main


def _runs(variant: str, graph: str, greedy: list[float]) -> list[dict]:
    return [
        dict(variant=variant, graph=graph, greedy=g, imitation_episodes=300, episodes=4300, seconds=90.0 + seed)
        for seed, g in enumerate(greedy)
    ]


def test_the_one_rollout_variant_differs_from_the_tuned_one_in_rollouts_per_update_alone():
    tuned, single = (next(v for v in VARIANTS if v.name == name) for name in LEVER)
    assert tuned.settings == TUNED and TUNED["rollouts_per_update"] == 8
    assert single.settings == {**TUNED, "rollouts_per_update": 1}
    assert single.settings["rollouts_per_update"] == 1 and single.seeds == tuned.seeds and single.graphs == LEVER_GRAPHS


def test_the_lever_table_keeps_quality_only_within_the_one_rollout_spread():
    chain, layer = LEVER_GRAPHS
    runs = [
        *_runs(LEVER[0], chain, [1300.0, 1400.0, 1500.0]),  # mean 1400
        *_runs(LEVER[1], chain, [1200.0, 1300.0, 1400.0]),  # mean 1300, std 81.6: 1400 > 1381.6
        *_runs(LEVER[0], layer, [180.0, 190.0, 200.0]),  # mean 190
        *_runs(LEVER[1], layer, [170.0, 190.0, 210.0]),  # mean 190, std 16.3
    ]
    rows = _lever_markdown(runs).splitlines()
    assert len(rows) == 4 and rows[2].startswith(f"| {chain} | 300+4000 | 1300.0 / 1400.0 / 1500.0 | 1400.0 ± 81.6 |")
    assert rows[2].endswith("| no |") and rows[3].endswith("| yes |")
    assert len(_lever_markdown([r for r in runs if r["variant"] == LEVER[0]]).splitlines()) == 2, "no row without both variants"


def test_bench_training_names_an_unknown_variant_or_graph_and_the_filters_are_for_training_alone(capsys):
    assert main(["bench", "training", "--variant", "doppler-turbo"]) == 2
    assert "unknown variant(s) doppler-turbo" in capsys.readouterr().err
    assert main(["bench", "training", "--variant", LEVER[1], "--graph", "chain_mm"]) == 2
    assert "unknown graph(s) chain_mm; graphs: chain_mm_112nodes" in capsys.readouterr().err
    assert main(["bench", "training", "--variant", LEVER[1], "--graph", "ffnn_192nodes"]) == 2
    assert "no variant of doppler-one-rollout trains on ffnn_192nodes" in capsys.readouterr().err
    assert main(["bench", "sim", "--quick", "--graph", "chain_mm_112nodes"]) == 2
    assert "--variant and --graph are for bench training, not sim" in capsys.readouterr().err


def test_the_training_loop_is_timed_per_episode_of_a_finished_run():
    pytest.importorskip("torch")
    from workbench.bench.episode import loop_episode_cpu

    seconds = loop_episode_cpu("chain_mm_112nodes", 4, episodes=8)
    assert math.isfinite(seconds) and 0 < seconds < 5


def test_the_quick_training_bench_trains_the_chosen_variants_and_tabulates_the_lever(tmp_path):
    pytest.importorskip("torch")
    from workbench.bench.training import run

    result = run(quick=True, root=tmp_path, variants=LEVER, graphs=LEVER_GRAPHS)
    assert {(r["variant"], r["seed"]) for r in result["runs"]} == {(v, s) for v in LEVER for s in (0, 1)}
    assert {r["graph"] for r in result["runs"]} == {"chain_mm_112nodes"}
    assert all(r["episodes"] == 12 for r in result["runs"])
    assert "quality kept (8's mean ≤ 1's mean + 1's std)" in result["markdown"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(LEVER)
