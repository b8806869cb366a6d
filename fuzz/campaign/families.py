"""The network families a campaign draws, declared once (`FAMILIES`): the engine draws from a family's strategy, the
test module has one test per family (or per model-zoo architecture), the hooks select, split, seed and budget a
family's items from its row, ``--fuzz-families`` focuses a campaign on some, and the self-tests name them from here.

Adding a family: a strategy module in `fuzz.generate`, a row here, and its test function in
fuzz/test_ckpt_grad_parity.py (named as the row says; its body one call). docs/architecture.md shows one.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from fuzz.campaign.profiles import PROFILES
from fuzz.generate.decoder import checkpointing_thunderfx_spec, decoder_specs
from fuzz.generate.draws import MAX_DIM
from fuzz.generate.program_specs import program_specs
from fuzz.generate.program_traits import Showing
from fuzz.generate.spec import DTYPES, NetSpec
from fuzz.generate.spec_parts import GRAD_MODES
from fuzz.generate.training import training_families
from fuzz.generate.zoo import SEED_MODEL, zoo_specs
from fuzz.strategies import net_specs


@dataclass(frozen=True)
class DrawOptions:
    """What a campaign's options say about drawing: device, dtypes, the general family's layer kinds, ops, widest
    dim (None: every one). The defaults draw everything on CPU."""

    device: str = "cpu"
    dtypes: tuple[str, ...] = DTYPES
    kinds: tuple[str, ...] | None = None
    ops: tuple[str, ...] | None = None
    max_dim: int = MAX_DIM
    architectures: tuple[str, ...] = ()  # the model zoo's (empty: all)
    grad_modes: tuple[str, ...] = GRAD_MODES  # those a program's layers may run under
    catalog_nodes: bool = True  # programs draw torch's view ops and the op catalog's updates (issue 49)
    structures: tuple[str, ...] = ()  # flow labels every program shows (`--fuzz-structure`)


Strategy = Callable[[DrawOptions], st.SearchStrategy[NetSpec]]


@dataclass(frozen=True)
class Family:
    """A family of networks and how a campaign runs it.

    ``parts``: how its test is split into items: "shards" (one per shard, spread over the workers), "architectures"
    (one per model-zoo architecture) or "one" (shard 0 only). ``weight``: an item's share of the budget relative to a
    general family's shard (spread over the architectures where they outnumber the shards). ``training_weight``: how
    often the training family draws it (0: never). Each of its examples judged alone is a Hypothesis event of its
    `coverage` label.
    """

    name: str
    test: str
    strategy: Strategy | None  # None: the op sweep, whose cases are listed, not drawn (`fuzz.generate.sweep`)
    parts: str = "shards"
    weight: float = 1.0
    batchable: bool = False
    profiles: tuple[str, ...] = PROFILES
    min_minutes: float = 0.0  # campaigns with a shorter budget (or none) do not run it
    examples_share: float = 1.0  # of the profile's max_examples, per item
    max_examples: int | None = None
    limit_s: float | None = None  # each example's time limit (None: the campaign's)
    training_weight: int = 0
    needs: tuple[str, ...] = ()  # modules it imports (missing: `unavailable` says so; its test skips)
    example: NetSpec | None = None  # run first, on its first part, whatever the campaign's dtypes

    def max_examples_of(self, default: int) -> int:
        """Its items' max_examples where the profile's is ``default``."""
        share = max(1, int(default * self.examples_share))
        return share if self.max_examples is None else min(share, self.max_examples)

    @property
    def coverage(self) -> str:
        return f"family {self.name}"

    def runs_in(self, profile: str, minutes: float | None) -> bool:
        """Whether campaigns of ``profile`` with a budget of ``minutes`` (None: none) run it."""
        return profile in self.profiles and (minutes or 0) >= self.min_minutes

    def unavailable(self) -> str | None:
        """None, or why this family's examples cannot run here."""
        missing = [module for module in self.needs if importlib.util.find_spec(module) is None]
        return f"the {self.name} family needs {', '.join(missing)}: `make setup` installs it" if missing else None


def _general(options: DrawOptions, nested: bool = False) -> st.SearchStrategy[NetSpec]:
    drawn = net_specs(
        device=options.device,
        kinds=options.kinds,
        dtypes=options.dtypes,
        ops=options.ops,
        nested=nested,
        max_dim=options.max_dim,
    )
    return drawn.filter(lambda spec: any(c.nested for c in spec.checkpoints)) if nested else drawn


def _nested(options: DrawOptions) -> st.SearchStrategy[NetSpec]:
    return _general(options, nested=True)


def _programs(options: DrawOptions) -> st.SearchStrategy[NetSpec]:
    drawn = program_specs(
        device=options.device,
        kinds=options.kinds,
        dtypes=options.dtypes,
        ops=options.ops,
        grad_modes=options.grad_modes,
        catalog_nodes=options.catalog_nodes,
    )
    return drawn.filter(Showing(options.structures)) if options.structures else drawn


def _decoders(options: DrawOptions) -> st.SearchStrategy[NetSpec]:
    return decoder_specs(device=options.device, dtypes=options.dtypes)


def _zoo(options: DrawOptions) -> st.SearchStrategy[NetSpec]:
    return zoo_specs(device=options.device, dtypes=options.dtypes, architectures=options.architectures)


def _training(options: DrawOptions) -> st.SearchStrategy[NetSpec]:
    """Training steps of the families with a training weight (simplest first: shrinking goes there)."""
    trained = [f for f in FAMILIES if f.training_weight and f.strategy is not None and f.unavailable() is None]
    return training_families([(f.strategy(options), f.training_weight) for f in trained])


# Nested checkpoints: thunder crashes on them (known issue nested-checkpoint-crash), often only after minutes of
# interpretation (measured: its registered spec runs past 120 s). Too slow for every shard and campaign, they are a
# slice of nightly campaigns of an hour or more: a few networks on shard 0, each under its own time limit (a time-out
# there is not run twice). A model's check takes ~30 s, 20-30 times a general network's: each architecture's item
# draws a quarter of the profile's examples (ci: 1). Training examples cost several steps and recompiles, and on
# thunder 0.2.6 still meet forms of known bugs whose signatures are not recorded: not in the ci slice.
SWEEP = Family("sweep", "test_op_sweep", None)
GENERAL = Family("general", "test_ckpt_grad_parity", _general, batchable=True, training_weight=6)
PROGRAM = Family("program", "test_program_ckpt_grad_parity", _programs, training_weight=4)
DECODER = Family(
    "decoder", "test_decoder_ckpt_grad_parity", _decoders, training_weight=2,
    example=checkpointing_thunderfx_spec("cpu"),
)  # fmt: skip
ZOO = Family(
    "zoo", "test_zoo_ckpt_grad_parity", _zoo, parts="architectures", examples_share=0.25,
    training_weight=1, needs=("transformers",), example=SEED_MODEL,
)  # fmt: skip
TRAINING = Family(
    "training", "test_training_ckpt_grad_parity", _training, profiles=tuple(p for p in PROFILES if p != "ci"),
)  # fmt: skip
NESTED_SLICE = Family(
    "nested", "test_nested_ckpt_grad_parity", _nested, parts="one", profiles=("nightly",), min_minutes=60.0,
    max_examples=3, limit_s=300.0,
)  # fmt: skip
# The module of the families' tests.
TEST_MODULE = "test_ckpt_grad_parity"
FAMILIES = (SWEEP, GENERAL, PROGRAM, DECODER, ZOO, TRAINING, NESTED_SLICE)
BY_NAME = {family.name: family for family in FAMILIES}
DRAWN_FAMILIES = tuple(family for family in FAMILIES if family.strategy is not None)
BY_TEST = {family.test: family for family in FAMILIES}
# The Hypothesis database keys of the family tests before this table (a test's key is a digest of its source, and
# the zoo's of its architecture), by item name (`fuzz.campaign.items.item_name`). What a database holds under them is
# moved to the test's key as its item starts (`fuzz.campaign.database.adopt_examples`).
LEGACY_KEYS: dict[str, str] = {
    "general": "c76d60057392b80fba9d90d948a9276da9284df95a25ec07713436d740e9a7424ceefbf9694d84aa1726efc5823e1ae0",
    "program": "f343baab6f76a5a98555f4cfbed2ba4416d6d7840e090c548ca9620c17bccfe17d2ce7d7a3038e20024ae6bcc82e8185",
    "decoder": "036558bf358c3194480a2dcd9c6c7214c98aa00940c8696d6699dbafb5108ca0c8740ef3509f5e2fd0ee8cc8c6ca6974",
    "training": "26b72095826c1144c6728357670c482c703cbdbab783b66e74ce87dbcf869f9c645c5058007e5562a147627e3a4045ac",
    "nested": "7ac900fa5637aeb30df3b286dff7bf021698327f832d7d0695eb5ed7f2d578480faf7001699877d42b47700672ce4cf9",
    "zoo[llama]": "3563145ef94840a8e627a5b4a2490815a285f8e0c90393cc1c4d23a85bb7e3eccfbb837efa78df1ac03c260cd9fc72a7",
    "zoo[mistral]": "0a4c35f855fcf6cef01947013420bb72c521b7ea6e52c661279d8ff10db369c9b53b3ff8bfd1d7267208c8edd00b17ae",
    "zoo[qwen2]": "6afb37c00212c39d49df1ea53796197008acfa8f66f3f77b59966c2913f9761aeaca1035bc58672cb26946c27ef81fc5",
    "zoo[gemma]": "90c19ef75bef4b6e7676985c2875a42fd4330665d0f1666780901249a831ed10afdc067c31d7cf12f62672611446b6c8",
    "zoo[phi]": "0aab3c0925a464dcd6c9ce067b8d55675f11f1fdd9e800b9236b7a8fa50b92bc2c3f7875ba9adea6aa98a59833e6e399",
    "zoo[gpt2]": "10494a676feb2f08eb1a468c6e92b3a4c2e3f80b3b3e3a7090552db10609a9807b429533c3f29ae85af0b4b413ac74bb",
    "zoo[bert]": "837a4f1dc0ebe2a76b22a99dd1af4a063a00ec81b33932be0d3a5c60b56cb26a44ee8b864e3546d82c7e3f43282a087f",
}
