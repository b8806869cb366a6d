"""What a layer kind declares (`LayerKind`): its parameters as plain domains (`Param`), what enters it
(`Incoming`), its output, source, fit and needs; the registry of kinds is `fuzz.generate.layers`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Param:
    """One parameter of a layer kind, valid or not depending on the incoming width.

    ``domain``, each shrinking toward its simplest value:
    ``"dim"`` a width 1..max_dim; ``"divisor"`` a divisor of the incoming width;
    ``"offset"`` 0..width-1; ``"flag"`` a bool (False); ``"choice"`` one of ``choices`` (the first);
    ``"name"`` a dotted Python name; ``"literal"`` an encoded argument list or keyword mapping
    (`fuzz.generate.ops.render`); ``"int"`` an integer ``low..high`` (``low``). The op family's names and
    literals are drawn from `fuzz.generate.op_catalog`.
    """

    name: str
    domain: str
    choices: tuple[str, ...] = ()
    low: int = 1
    high: int = 1
    optional: bool = False  # may be left out of a layer's params (a spec written before it existed stays valid)

    def is_valid(self, value: Any, width: int) -> bool:
        if self.domain == "dim":
            return is_int(value) and value >= 1
        if self.domain == "divisor":
            return is_int(value) and value >= 1 and width % value == 0
        if self.domain == "offset":
            return is_int(value) and 0 <= value < width
        if self.domain == "flag":
            return isinstance(value, bool)
        if self.domain == "name":
            return isinstance(value, str) and bool(_DOTTED_NAME.fullmatch(value))
        if self.domain == "literal":
            return isinstance(value, list | dict)
        if self.domain == "int":
            return is_int(value) and self.low <= value <= self.high
        return value in self.choices


@dataclass(frozen=True)
class Incoming:
    """What enters a layer: the batch size, the width (features, or an image's channels), for an
    image ``(batch, channels, *spatial)`` its spatial sizes (None for features), the network's dtype and device."""

    batch: int
    width: int
    spatial: tuple[int, ...] | None = None
    dtype: str = "float32"
    device: str = "cpu"


def _unchanged(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    return params


@dataclass(frozen=True)
class Flow:
    """What a data-flow kind of a program (`fuzz.generate.program`) does with the values it reads, for the rules of
    where eager allows an in-place update. Its source reads ``x`` (and ``y``, the second value it reads).

    ``reads``: how many values it reads. ``updates``: it updates ``x`` in place, its value is ``x``. ``fresh``: its
    value is a new tensor that nothing saves for backward, so a later in-place update of it is allowed (neither: a
    view of ``x``). ``saves``: it saves the values it reads for backward (a later update of them
    fails in eager's backward). ``saves_value``: it saves its own value (sigmoid_'s backward reads its result).
    ``twin``: the out-of-place kind an update becomes where eager would reject it (its params kept).
    A view: ``contiguous(params, incoming)`` says whether it is contiguous when ``x`` is (None: as ``x``);
    ``needs_contiguous``: ``x`` must be contiguous (``view``, ``as_strided``; a ``reshape`` of it would copy);
    ``overlaps``: elements of it share memory (an expand: eager rejects updating it). ``plain``: the kind of today's
    three data-flow updates a node of the op catalog's stands for when reduction tries the simplest network
    (`fuzz.generate.reduce`). ``detaches``: its value never requires grad (a ``detach``). ``statement``: its source is
    a statement updating ``x`` (an indexed assignment), its value ``x``. ``input``: its value is an argument of the
    network's forward, made before the call (`fuzz.generate.flow.INPUT_KINDS`). ``masks``: it reads ``y`` only as a
    mask (no grad flows from it: ``masked_fill_``).
    """

    reads: int = 1
    updates: bool = False
    fresh: bool = False
    saves: bool = False
    saves_value: bool = False
    twin: str | None = None
    contiguous: Callable[[Mapping[str, Any], Incoming], bool] | None = None
    needs_contiguous: bool = False
    overlaps: bool = False
    plain: str | None = None
    detaches: bool = False
    statement: bool = False
    input: bool = False
    masks: bool = False


@dataclass(frozen=True)
class LayerKind:
    """A kind of layer: parameters, output width, source, and what it needs of the harness.

    ``source(params, width)`` is a module constructor, or for a ``functional`` kind an
    expression of ``x``. ``apply(params, module)``: the expression applying a module layer held
    in attribute ``module`` to ``x`` (default: ``module(x)``). ``has_parameters``: the module can
    have parameters (so it can be frozen); ``parameters_flag`` names the flag param that turns them on, if one does.
    ``inplace``: updates a tensor in place (activations, views of computed tensors, buffers): kept out of
    selective checkpointing, where eager rejects in-place updates of what the policy saves.
    ``helpers``: names of the `fuzz.generate.blocks` classes and functions the source uses. ``random``: draws random
    numbers in training mode (eager and thunder draw different streams; the oracle compares such networks
    differently, see `fuzz.judge.failures`). ``layout``: "features", "channels" or "any" (module docstring).
    ``out_spatial(params, spatial)``: a "channels" kind's output spatial sizes. ``fit(params, incoming)``:
    the drawn ``params`` made valid for ``incoming`` (a spec is valid only where its params are fitted
    already). ``accepts(incoming)``: whether the kind can take that input at all. ``mutates_input``:
    may update its own input in place (see `fuzz.generate.spec.validate` for where eager allows it). ``drawn``: the
    strategies draw it (not so a kind only reduction makes, `fuzz.generate.reduce`). ``flow``: a data-flow kind,
    a node of programs only (`Flow`). ``transposes``: its output is its ``(rows, width)`` input transposed.
    ``reshapes(params, incoming)``: a program node's output shape, rows included (None: ``out_features``).
    ``strided``: its output may not be contiguous even where what it reads is (a program's view of it may fail); any
    other kind's output is contiguous where what it reads is, and may keep the strides of one that is not.
    """

    name: str
    source: Callable[[Mapping[str, Any], int], str]
    params: tuple[Param, ...] = ()
    out_features: Callable[[Mapping[str, Any], int], int] = field(default=lambda params, width: width)
    helpers: tuple[str, ...] = ()
    functional: bool = False
    apply: Callable[[Mapping[str, Any], str], str] | None = None
    has_parameters: bool = False
    parameters_flag: str | None = None
    inplace: bool = False
    random: bool = False
    mutates_input: bool = False
    layout: str = "features"
    out_spatial: Callable[[Mapping[str, Any], tuple[int, ...]], tuple[int, ...]] = field(
        default=lambda params, spatial: spatial
    )
    fit: Callable[[Mapping[str, Any], Incoming], Mapping[str, Any]] = _unchanged
    accepts: Callable[[Incoming], bool] | None = None
    drawn: bool = True
    flow: Flow | None = None
    transposes: bool = False
    reshapes: Callable[[Mapping[str, Any], Incoming], Incoming] | None = None
    strided: bool = False

    def output(self, params: Mapping[str, Any], incoming: Incoming) -> Incoming:
        """What a layer of this kind with ``params`` outputs for ``incoming``."""
        if self.transposes:  # a matrix (rows, width) transposed
            return dataclasses.replace(incoming, batch=incoming.width, width=incoming.batch)
        if self.reshapes is not None:
            return self.reshapes(params, incoming)
        spatial = None if incoming.spatial is None else self.out_spatial(params, incoming.spatial)
        return dataclasses.replace(incoming, width=self.out_features(params, incoming.width), spatial=spatial)

    def takes(self, incoming: Incoming) -> bool:
        """Whether a layer of this kind can take ``incoming`` (its layout, then its own ``accepts``)."""
        image = incoming.spatial is not None
        if self.layout != "any" and (self.layout == "channels") != image:
            return False
        return self.accepts is None or self.accepts(incoming)

    def trainable(self, params: Mapping[str, Any]) -> bool:
        """Whether a layer of this kind with ``params`` has parameters."""
        return self.has_parameters and (self.parameters_flag is None or bool(params[self.parameters_flag]))
