"""The side-by-side timing of the paper's own training episode (workbench.bench.paper_episode), on a stand-in checkout."""

from __future__ import annotations

import json
import textwrap

import pytest

from workbench.bench.episode import paper_episode_seconds

STAND_IN = """
import time

import torch
import wandb  # stubbed by the harness: the paper's code imports it to log
from dotenv import load_dotenv
import matplotlib.pyplot as plt

torch.autograd.set_detect_anomaly(True)  # as the paper's agents do at import


class Run_placement:
    def __init__(self, args):
        self.args = args
        self.graph = open(args.compute_graph_path).read()

    def run_one_episode(self, episode_id, graph, node_epsilon, device_epsilon, running_time_sum):
        assert not torch.is_anomaly_enabled() and self.args.num_device == 8 and self.args.num_episode == 3
        wandb.log({"episode_id": episode_id})
        began = time.process_time()
        while time.process_time() - began < 0.01 * (episode_id + 1):
            pass
        print("device_list: noise the paper prints")
        return 100.0 + episode_id, 0.0, None, running_time_sum
"""


@pytest.fixture
def stand_in(tmp_path):
    (tmp_path / "config_files/run_doppler").mkdir(parents=True)
    (tmp_path / "compute_graph").mkdir()
    (tmp_path / "config_files/run_doppler/rl_simulation_learning.json").write_text(json.dumps({"num_device": 4, "use_wandb": True}))
    (tmp_path / "compute_graph/tiny.txt").write_text("graph")
    (tmp_path / "run_placement.py").write_text(textwrap.dedent(STAND_IN))
    return tmp_path


def test_the_paper_episodes_are_timed_with_anomaly_detection_off_and_the_first_not_counted(stand_in):
    seconds = paper_episode_seconds(stand_in, "tiny", 2, devices=8)
    assert len(seconds) == 2 and 0.015 <= seconds[0] < seconds[1], "episodes 2 and 3, each burning more CPU than the last"


def test_a_folder_that_is_not_the_papers_code_is_named(stand_in, tmp_path):
    with pytest.raises(RuntimeError, match="rl_simulation_learning.json is missing"):
        paper_episode_seconds(tmp_path / "missing", "tiny", 1)
    with pytest.raises(RuntimeError, match="compute_graph/other.txt is missing"):
        paper_episode_seconds(stand_in, "other", 1)
    (stand_in / "run_placement.py").write_text("import dgllife_that_is_not_installed\n")
    with pytest.raises(RuntimeError, match="pip install dgllife"):
        paper_episode_seconds(stand_in, "tiny", 1)


def test_paper_code_is_refused_for_another_benchmark(capsys):
    from workbench.cli import main

    assert main(["bench", "sim", "--quick", "--paper-code", "."]) == 2
    assert "--paper-code is for bench episode, not sim" in capsys.readouterr().err
