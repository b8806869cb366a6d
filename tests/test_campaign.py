"""What a campaign does around each example: remembering outcomes, the shrinking time limit."""

import time

import torch
from thunder.dynamo.utils import _torch_to_thunder_function_map

import fuzz.budget
from fuzz.campaign import Campaign
from fuzz.config import CampaignConfig
from fuzz.oracle import GradientDivergence
from fuzz.spec import CheckpointSpec, LayerSpec, NetSpec
from tests.faults import busy, injected


def _tanh(features: int = 3) -> NetSpec:
    return NetSpec(features, [LayerSpec("tanh")], [CheckpointSpec(0, 1)], batch=2)


def test_a_network_the_shard_already_ran_is_answered_from_memory(tmp_path):
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    campaign.start_item()
    first, _ = campaign._outcome(_tanh(), ())
    again, _ = campaign._outcome(NetSpec.from_json(_tanh().to_json()), ())
    assert again is first and campaign.stats.examples == 1 and campaign.stats.repeats == 1
    campaign.start_item()  # a new shard starts afresh
    campaign._outcome(_tanh(), ())
    assert campaign.stats.examples == 2


def test_while_shrinking_a_step_far_slower_than_the_failure_is_rejected_not_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz.budget, "SHRINKING_TIMEOUT_FLOOR_S", 2.0)
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, timeout_s=60))
    campaign.start_item()
    assert campaign.budget.example_timeout_s() == 60
    with injected("tanh-grad-x2"):
        failing, _ = campaign._outcome(_tanh(), ())
    assert isinstance(failing.failure, GradientDivergence)
    limit = campaign.budget.example_timeout_s()
    assert limit == max(2.0, 4 * failing.seconds) < 60

    def hangs(a):
        busy(60)
        return a

    monkeypatch.setitem(_torch_to_thunder_function_map, torch.tanh, hangs)
    start = time.monotonic()
    slow, _ = campaign._outcome(_tanh(features=4), ())
    assert time.monotonic() - start < limit + 20
    assert not slow.valid and slow.invalid_reason == "over the time limit while shrinking" and slow.failure is None


def test_a_progress_line_only_when_examples_ran_since_the_last_one(tmp_path):
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    assert campaign.progress_line() is None  # nothing ran yet
    campaign.start_item()
    campaign._outcome(_tanh(), ())
    campaign.write_worker_stats()
    assert "1 examples" in campaign.progress_line()
    assert campaign.progress_line() is None  # the shards are done while other tests run: no repeated line
    campaign._outcome(_tanh(2), ())
    campaign.write_worker_stats()
    assert "2 examples" in campaign.progress_line()
