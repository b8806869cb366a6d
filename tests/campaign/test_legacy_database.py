"""A Hypothesis database filled before the family table (issue 48) changed the tests' sources, and with them their
database keys, still replays the same networks: its examples move to the tests' keys as each item starts."""

import json
import shutil
from pathlib import Path

from fuzz.campaign.families import GENERAL
from tests.campaign_runs import run_campaign

# A general-family failure saved by a 4-minute campaign at 55690e9 (the tanh-grad-x2 fault; layers tanh, relu,
# linear; float32; one shard), under the key its test had then (`fuzz.campaign.families.LEGACY_KEYS`): the directory
# database's folder of that key holds it. Its network, shrunk then: a checkpointed tanh (spec digest 1a6c3841).
LEGACY = Path(__file__).resolve().parents[1] / "specs" / "legacy-database"
OLD_KEY_FOLDER = "14eb865d8d5b3feb"


def test_a_database_from_before_the_family_table_replays_the_same_failure(tmp_path):
    shutil.copytree(LEGACY, tmp_path / "db")
    run = run_campaign(
        tmp_path,
        *("--hypothesis-profile", "replay", "--fuzz-families", GENERAL.name, "--fuzz-shards", "1"),
        *("--fuzz-layers", "tanh,relu,linear", "--fuzz-dtypes", "float32", "--fuzz-confirm", "no"),
        fault="tanh-grad-x2",
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((tmp_path / "artifacts" / "latest" / "summary.json").read_text())
    assert [f["id"] for f in summary["failures"]] == ["gradient-divergence-checkpoint-specific-1a6c3841"], summary
    old = tmp_path / "db" / OLD_KEY_FOLDER
    assert not old.exists() or not list(old.iterdir()), "the old key's example moved to the test's key"
