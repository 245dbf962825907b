"""A model whose structure changes between calls gets a new graph, never the old one.

The identity of a container layer (``LayerList``, ``Sequential``, ``LayerDict``) says
nothing about what it holds: ``append``, ``add_sublayer``, ``del`` or a replaced item keep
the object and change what a loop over it computes. Each case runs eagerly and through
``optimize()`` after every change, and the results must agree.
"""

from __future__ import annotations

import copy

import paddle
import pytest

import jit_core

from .helpers import assert_same


class Blocks(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(2)])
        self.head = paddle.nn.Sequential(paddle.nn.Linear(4, 4))
        self.branches = paddle.nn.LayerDict({"a": paddle.nn.Linear(4, 4)})

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        x = self.head(x)
        for name in self.branches:
            x = x + self.branches[name](x)
        return x * len(self.blocks)


class LastBlock(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        if self.blocks:
            x = self.blocks[-1](x)
        return x


def _grow_layer_list(net):
    net.blocks.append(paddle.nn.Linear(4, 4))


def _grow_sequential(net):
    net.head.add_sublayer("extra", paddle.nn.Linear(4, 4))


def _grow_layer_dict(net):
    net.branches["b"] = paddle.nn.Linear(4, 4)


def _shrink_layer_dict(net):
    del net.branches["a"]


def _replace_item(net):
    net.blocks[0] = paddle.nn.Linear(4, 4)


def assert_a_change_is_a_new_graph(net, change, backend, seed: int) -> None:
    """Eager's results before and after ``change(net)``, and exactly one more compile:
    the first graph still serves the first structure, the second the changed one."""
    paddle.seed(seed)
    net.eval()
    x = paddle.rand([2, 4])
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(x), net(x))
    assert_same(fast(x), net(x))
    assert fast.jit_stats.compiled == 1, fast.jit_stats
    paddle.seed(seed + 1)
    change(net)
    assert_same(fast(x), net(x))
    assert fast.jit_stats.compiled == 2, fast.jit_stats


@pytest.mark.parametrize(
    "change",
    [_grow_layer_list, _grow_sequential, _grow_layer_dict, _shrink_layer_dict, _replace_item],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_changed_container_is_a_new_graph(change, backend):
    paddle.seed(7)
    assert_a_change_is_a_new_graph(Blocks(), change, backend, seed=7)


def test_negative_index_and_truth_follow_the_length(backend):
    paddle.seed(9)
    net = LastBlock()
    net.eval()
    x = paddle.rand([3, 4])
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(x), net(x))
    net.blocks.append(paddle.nn.Linear(4, 4))  # blocks[-1] is another layer now
    assert_same(fast(x), net(x))
    emptied = copy.deepcopy(net)
    emptied.eval()
    fast_emptied = jit_core.optimize(emptied, backend=backend)
    assert_same(fast_emptied(x), emptied(x))
    while len(emptied.blocks):
        del emptied.blocks[len(emptied.blocks) - 1]
    assert_same(fast_emptied(x), emptied(x))


def test_unchanged_structure_is_a_cache_hit(backend):
    paddle.seed(10)
    net = Blocks()
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(3):
        x = paddle.rand([2, 4])
        assert_same(fast(x), net(x))
    assert fast.jit_stats.compiled == 1


class Wrapped(paddle.nn.Layer):
    def __init__(self, act):
        super().__init__()
        self.act = act

    def forward(self, x):
        return self.act(x)


@pytest.mark.parametrize("second", ["sigmoid", "leaky"])
def test_other_layers_under_one_attribute_name_never_share_a_compiled_graph(second, backend):
    # the generated code reads the same (``self.act(x)``) and no layer has parameters:
    # what the backend built for one must not be served to the other (compile cache keys)
    x = paddle.linspace(-3, 3, 12).reshape([3, 4])
    other = {"sigmoid": paddle.nn.Sigmoid(), "leaky": paddle.nn.LeakyReLU(0.3)}[second]
    for act in (paddle.nn.LeakyReLU(0.01), other):
        net = Wrapped(act)
        net.eval()
        assert_same(jit_core.optimize(net, backend=backend)(x), net(x))


class Block(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.inner = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x) * 2


class Outer(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return self.head(self.block(x))


@pytest.mark.parametrize("where", ["block", "block.inner", "head"])
def test_a_hook_registered_after_the_capture_runs(where, backend):
    # the forward of a user layer is inlined into its parent's graph: a hook added to it
    # later was never run (the graph skipped its Layer.__call__)
    paddle.seed(11)
    net = Outer()
    net.eval()
    x = paddle.rand([2, 4])
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(2):
        assert_same(fast(x), net(x))
    layer = net
    for name in where.split("."):
        layer = getattr(layer, name)
    pre = layer.register_forward_pre_hook(lambda _, args: (args[0] * 3,))
    post = layer.register_forward_post_hook(lambda _, args, out: out + 1)
    assert_same(fast(x), net(x))
    pre.remove()
    post.remove()
    assert_same(fast(x), net(x))


class ModeSensitive(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 8)
        self.norm = paddle.nn.LayerNorm(8)
        self.drop = paddle.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.norm(self.fc(x)))


def test_only_layers_whose_forward_reads_the_mode_have_it_guarded(backend):
    """A guard is paid on every call: Linear and LayerNorm compute the same in both modes,
    Dropout does not. Switching the mode of a layer that ignores it is a cache hit;
    switching Dropout's is a new graph, with eager's results."""
    paddle.seed(4)
    net = ModeSensitive()
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    x = paddle.rand([3, 4])
    with paddle.no_grad():
        assert_same(fast(x), net(x))
        net.fc.train()
        net.norm.train()
        assert_same(fast(x), net(x))
        assert fast.jit_stats.compiled == 1
        net.drop.train()
        paddle.seed(5)
        out = fast(x)
        paddle.seed(5)
        assert_same(out, net(x))
    assert fast.jit_stats.compiled == 2
    assert float((out == 0).astype("float32").mean()) > 0.1  # dropout drew zeros


class Scaled(paddle.nn.Layer):
    """Reads a plain attribute, a property and an attribute that may be absent, on a
    sublayer: the guard reads them from the sublayer's instance dict where that is what
    ``getattr`` finds."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.fc.gain = 2.0
        self._shift = 1.0

    @property
    def shift(self):  # a data descriptor: never read through the instance dict
        return self._shift

    @shift.setter
    def shift(self, value):
        self._shift = value

    def forward(self, x):
        x = self.fc(x) * self.fc.gain + self.shift
        if hasattr(self.fc, "extra"):
            x = x + self.fc.extra(x)
        return x


def _set_gain(net):
    net.fc.gain = 3.0


def _set_shift(net):
    net.shift = -1.0


def _extra_as_attribute(net):
    net.fc.extra = paddle.nn.functional.relu  # a plain value in the instance dict


def _extra_as_sublayer(net):
    net.fc.extra = paddle.nn.Linear(4, 4)  # Paddle keeps it in _sub_layers


def _extra_on_the_class(net):
    subclass = type("LinearWithExtra", (paddle.nn.Linear,), {"extra": staticmethod(paddle.tanh)})
    net.fc.__class__ = subclass


@pytest.mark.parametrize(
    "change",
    [_set_gain, _set_shift, _extra_as_attribute, _extra_as_sublayer, _extra_on_the_class],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_changed_attribute_of_a_sublayer_is_a_new_graph(change, backend):
    paddle.seed(12)
    assert_a_change_is_a_new_graph(Scaled(), change, backend, seed=12)


class Indexed(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        return self.blocks[1](x) + self.blocks[0](x)


def _insert_first(net):
    net.blocks.insert(0, paddle.nn.Linear(4, 4))


def _delete_first(net):
    del net.blocks[0]


def _replace_second(net):
    net.blocks[1] = paddle.nn.Linear(4, 4)


@pytest.mark.parametrize(
    "change", [_insert_first, _delete_first, _replace_second], ids=lambda f: f.__name__.strip("_")
)
def test_an_indexed_layer_list_follows_insert_delete_and_replace(change, backend):
    # ``blocks[1]`` is guarded as the sublayer stored under "1": Paddle renumbers the
    # keys on insert and delete, so the item at an index is always under its number
    paddle.seed(14)
    assert_a_change_is_a_new_graph(Indexed(), change, backend, seed=14)
