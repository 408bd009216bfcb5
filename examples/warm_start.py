"""Does a learned placement make a better starting point for local search than the heuristics?

For each paper graph (4 devices): the shipped Doppler policy's greedy
placement, then local_search from the best heuristic ("cold") and from that
placement ("warm", ``start=``) at a few budgets, 3 seeds each. Makespans
÷ 1e10, mean ± std. Run: ``python examples/warm_start.py`` (under a minute).
The policy's own training episodes are not counted in the budgets.
"""

import numpy as np

import workbench as wb

GRAPHS = ("chain_mm_112nodes", "ffnn_192nodes", "transformer_block_215nodes", "full_transformer_layer_261nodes")
BUDGETS = (500, 2000, 8000)
SEEDS = (0, 1, 2)


def stats(values: list[float]) -> str:
    return f"{np.mean(values):.1f} ± {np.std(values):.1f}"


print("| graph | doppler greedy | " + " | ".join(f"{b} evaluations: cold / warm" for b in BUDGETS) + " |")
print("|---|---|" + "---|" * len(BUDGETS))
for name in GRAPHS:
    graph = wb.bundled_graph(name)
    learned = wb.place(graph, method="doppler", devices=4)
    cells = [name, f"{learned.makespan / 1e10:.1f}"]
    for budget in BUDGETS:
        cold = [wb.place(graph, "local_search", 4, seed=s, budget=budget).makespan / 1e10 for s in SEEDS]
        warm = [wb.place(graph, "local_search", 4, seed=s, budget=budget, start=learned.assignment).makespan / 1e10 for s in SEEDS]
        cells.append(f"{stats(cold)} / {stats(warm)}")
    print("| " + " | ".join(cells) + " |", flush=True)
