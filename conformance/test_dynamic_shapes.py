"""Dynamic shapes: one capture serves every size of a dimension that changes.

Each case counts its captures exactly and checks the results against eager Paddle at
every size. Backends that build for fixed shapes (onnxrt, tvm) get one build per input
shape behind the same capture (``jit_core.kit.shape_dispatch``).
"""

from __future__ import annotations

import paddle
import pytest

import jit_core

from .helpers import assert_same


def _check(fast, fn, *args):
    assert_same(fast(*args), fn(*args))


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = paddle.nn.Sequential(
            paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 4)
        )

    def forward(self, x):
        return self.body(x)


def test_mlp_every_batch_size_captures_twice(backend):
    paddle.seed(0)
    net = MLP()
    fast = jit_core.optimize(net, backend=backend)
    for b in range(1, 65):
        _check(fast, net, paddle.randn([b, 8]))
    stats = fast.jit_stats
    # batch 1 (static), then batch 2 makes dimension 0 dynamic: sizes 2..64 share it
    assert stats.captures == 2, stats
    assert stats.eager_frames == {}, stats
    notes = stats.dynamic_shapes[jit_core.api.frame_key(MLP.forward)]
    assert notes == ["dimension 0 of L['x'] is dynamic: its size changed from 1 to 2"]
    # explain() of the optimized layer captures as its next call would: dynamic
    assert "L['x']: dimension(s) 0 dynamic" in str(jit_core.explain(fast, paddle.randn([5, 8])))


class Encoder(paddle.nn.Layer):
    """BERT-style: token and position embeddings, a padding mask, TransformerEncoder."""

    def __init__(self, vocab=50, d=16, heads=2, layers=2):
        super().__init__()
        self.tok = paddle.nn.Embedding(vocab, d)
        self.pos = paddle.nn.Embedding(64, d)
        layer = paddle.nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0)
        self.encoder = paddle.nn.TransformerEncoder(layer, layers)
        self.head = paddle.nn.Linear(d, 3)

    def forward(self, ids, mask):
        batch, seq = ids.shape[0], ids.shape[1]
        pos = paddle.arange(seq).unsqueeze(0).expand([batch, seq])
        h = self.tok(ids) + self.pos(pos)
        # 0 where a token is padding: -1e4 added to its attention scores
        bias = (1.0 - mask.astype("float32")).reshape([batch, 1, 1, seq]) * -1e4
        h = self.encoder(h, bias)
        return self.head(h[:, 0])


def test_encoder_over_a_grid_of_batch_and_length_captures_three_times(backend):
    paddle.seed(0)
    net = Encoder()
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    pairs = [(2, 5), (3, 5), (3, 7), (4, 9), (2, 12), (5, 6), (6, 3), (2, 3), (7, 11)]
    pairs += [(3, 4), (8, 2), (4, 16)]
    for batch, seq in pairs:
        ids = paddle.randint(0, 50, [batch, seq])
        mask = paddle.ones([batch, seq], "int64")
        mask[:, seq - 1 :] = 0
        _check(fast, net, ids, mask)
    stats = fast.jit_stats
    # (2, 5) static; (3, 5) makes the batch dynamic; (3, 7) the length
    assert stats.captures == 3, stats
    assert stats.eager_frames == {}, stats


def sizes(x):
    n = x.shape[0]
    flat = x.reshape([n, -1])
    zeros = paddle.zeros([x.shape[0], 4])
    halves = flat.split(2, -1)
    wide = paddle.ones([1, x.shape[1]]).expand([n, x.shape[1]])
    return halves[0] * (n + 1) + halves[1] // 2, zeros + n % 3, wide * (len(x) - 1)


def test_size_arithmetic_reshape_zeros_split_expand(backend):
    fast = jit_core.optimize(sizes, backend=backend, dynamic=True)
    for b in (2, 3, 5, 8, 13):
        _check(fast, sizes, paddle.randn([b, 6]))
    assert fast.jit_stats.captures == 1, fast.jit_stats


def branch(x):
    if x.shape[0] > 4:
        return x * 2
    return x - 1


def test_a_branch_on_a_size_guards_the_relation(backend):
    fast = jit_core.optimize(branch, backend=backend, dynamic=True)
    for b in (2, 3, 4, 5, 9, 3, 12):
        _check(fast, branch, paddle.randn([b, 3]))
    # one capture where x.shape[0] > 4 holds, one where it does not
    assert fast.jit_stats.captures == 2, fast.jit_stats
    out = jit_core.explain(
        jit_core.optimize(branch, backend=backend, dynamic=True), paddle.ones([6, 3])
    )
    assert "(L['x'].shape[0] > 4)" in out.guards[0]
    assert "dimension(s) 0, 1 dynamic" in str(out)


def test_sizes_zero_and_one_specialise(backend):
    fast = jit_core.optimize(branch, backend=backend, dynamic=True)
    for b in (1, 0, 2, 3, 1, 0):
        _check(fast, branch, paddle.randn([b, 3]))
    # 1 and 0 are each their own capture; 2 and 3 share one
    assert fast.jit_stats.captures == 3, fast.jit_stats
    out = jit_core.explain(
        jit_core.optimize(branch, backend=backend, dynamic=True), paddle.ones([1, 3])
    )
    assert "dimension 0 static (size 1 specialises" in str(out)


def scale(x):
    return x * 3 + 1


def test_dynamic_false_captures_every_size(backend):
    fast = jit_core.optimize(scale, backend=backend, dynamic=False)
    for b in (2, 3, 4):
        _check(fast, scale, paddle.randn([b, 2]))
    assert fast.jit_stats.captures == 3, fast.jit_stats


def test_mark_dynamic_from_the_first_capture_with_bounds(backend):
    fast = jit_core.optimize(scale, backend=backend, dynamic=False)
    for b in (3, 4, 6, 7, 9, 7, 5):
        x = paddle.randn([b, 2])
        jit_core.mark_dynamic(x, 0, max=6)
        _check(fast, scale, x)
    # 3, 4, 6 and 5 share the first; 7 and 9 are past max: each a static capture
    assert fast.jit_stats.captures == 3, fast.jit_stats
    x = paddle.randn([5, 2])
    jit_core.mark_dynamic(x, 0, max=6)
    guard = jit_core.explain(jit_core.optimize(scale, backend=backend), x).guards[0]
    assert "[0] >= 2" in guard and "[0] <= 6" in guard


def test_mark_static_keeps_a_dimension_static(backend):
    fast = jit_core.optimize(scale, backend=backend)
    for b in (2, 3, 4, 5):
        x = paddle.randn([b, 2])
        jit_core.mark_static(x, 0)
        _check(fast, scale, x)
    assert fast.jit_stats.captures == 4, fast.jit_stats


def test_mark_dynamic_refuses_a_dimension_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        jit_core.mark_dynamic(paddle.ones([2, 3]), 2)


def rows(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i] * i)
    return paddle.stack(out)


def test_a_loop_over_a_size_specialises_it(backend):
    fast = jit_core.optimize(rows, backend=backend, dynamic=True)
    for b in (2, 3, 2, 3):
        _check(fast, rows, paddle.randn([b, 4]))
    # the number of rows decides the number of graph ops: one capture per size
    assert fast.jit_stats.captures == 2, fast.jit_stats


def made_size(x):
    y = paddle.nonzero(x > 1e9)  # (a size that only the data decides)
    for _ in range(y.shape[0] // 2):
        x = x + 1
    return x


def test_a_size_of_a_made_tensor_in_python_makes_the_frame_static(backend):
    fast = jit_core.optimize(made_size, backend=backend, dynamic=True)
    for b in (2, 3, 3):
        _check(fast, made_size, paddle.randn([b, 2]))
    assert fast.jit_stats.captures == 2, fast.jit_stats
    assert "every dimension static" in str(fast.jit_stats.dynamic_shapes)
    assert "every dimension static" in str(fast.jit_stats.dynamic_shapes)
    out = jit_core.explain(
        jit_core.optimize(made_size, backend=backend, dynamic=True), paddle.ones([2, 2])
    )
    assert "every dimension static" in str(out) and "a size of a tensor the graph made" in str(out)


class ScaledAttention(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.q = paddle.nn.Linear(8, 8)
        self.k = paddle.nn.Linear(8, 8)

    def forward(self, x):
        q, k = self.q(x), self.k(x)
        scale = q.shape[-1] ** -0.5  # 8 at every batch and length
        att = paddle.matmul(q, k, transpose_y=True) * scale
        for i in range(q.shape[-1] // 4):
            att = att + i
        return paddle.nn.functional.softmax(att, -1)


def test_a_fixed_size_of_a_made_tensor_is_a_constant(backend):
    """``q.shape[-1]`` of a tensor the graph made is known at every size (Paddle's shape
    inference says so): a constant without a guard, and the shapes stay dynamic."""
    paddle.seed(0)
    net = ScaledAttention()
    fast = jit_core.optimize(net, backend=backend)
    for b, s in [(2, 3), (3, 5), (4, 6), (2, 7), (5, 2)]:
        _check(fast, net, paddle.randn([b, s, 8]))
    assert fast.jit_stats.captures == 2, fast.jit_stats
    assert "static" not in str(fast.jit_stats.dynamic_shapes)


class CachedAttention(paddle.nn.Layer):
    """A decoder step as PaddleNLP's LLaMA writes it: the KV cache grows by one row per
    call; the code checks its shapes against sizes it computed (``!=`` on lists), slices a
    rotary table by the length, and reads the cache length with ``paddle.shape``."""

    def __init__(self):
        super().__init__()
        self.qkv = paddle.nn.Linear(8, 24)
        self.register_buffer("table", paddle.rand([1, 64, 1, 4]))

    def forward(self, x, past):
        b, q_len, _ = x.shape
        q, k, v = paddle.split(self.qkv(x).reshape([b, q_len, 2, 12]), 3, axis=-1)
        kv_len = k.shape[-3]
        kv_len += past[0].shape[-3]
        cache_len = paddle.shape(past[0])[1]  # a 0-D tensor
        rot = self.table[:, :kv_len].squeeze(axis=[0, 2])
        position = paddle.arange(cache_len, cache_len + q_len).unsqueeze(0)
        q = q * rot[position].unsqueeze(2)
        k = paddle.concat([past[0], k], axis=1)
        v = paddle.concat([past[1], v], axis=1)
        w = paddle.matmul(q.transpose([0, 2, 1, 3]), k.transpose([0, 2, 3, 1]))
        if w.shape != [b, 2, q_len, kv_len]:
            raise ValueError(f"attention weights of shape {w.shape}")
        mask = paddle.ones([b, cache_len + q_len]).reshape([b, 1, 1, kv_len])
        out = paddle.matmul(paddle.nn.functional.softmax(w + mask, -1), v.transpose([0, 2, 1, 3]))
        return out.transpose([0, 2, 1, 3]).reshape([b, q_len, 8]), (k, v)


def test_a_growing_kv_cache_keeps_one_capture(backend):
    """Sizes of tensors the graph made (the concatenated cache, the attention weights)
    have expressions over the inputs, so comparing them with Python sizes guards a
    relation instead of making the shapes static (which reached the recompile limit)."""
    paddle.seed(0)
    net = CachedAttention()
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    x = paddle.randn([1, 1, 8])
    past = (paddle.randn([1, 3, 2, 4]), paddle.randn([1, 3, 2, 4]))
    fast_past = past
    for _ in range(12):
        out, past = net(x, past)
        got, fast_past = fast(x, fast_past)
        assert_same(got, out, rtol=1e-4, atol=1e-5)
        assert_same(fast_past, past, rtol=1e-4, atol=1e-5)
    # the length 3, then every length from 4 on
    assert fast.jit_stats.captures == 2, fast.jit_stats
    assert fast.jit_stats.eager_frames == {}, fast.jit_stats
    assert "static" not in str(fast.jit_stats.dynamic_shapes)
    report = jit_core.explain(fast, x, past)
    assert report.graph_count == 1 and report.break_count == 0
    guards = "\n".join(report.guards)
    # no guard pins the length; the shape check holds at every length and needs none
    assert "shape[1] ==" not in guards.replace(" ", ""), guards


def sized_branch(x, y):
    z = paddle.concat([x, y], axis=1)  # z.shape[1] == x.shape[1] + y.shape[1]
    if z.shape[1] == x.shape[0] + 3:
        return z * 2
    return z - 1


def test_a_branch_on_a_made_size_takes_both_ways(backend):
    """The branch's answer changes with the sizes: a wrong size expression would take
    the wrong way on some call."""
    fast = jit_core.optimize(sized_branch, backend=backend, dynamic=True)
    for n, m, r in [(4, 3, 5), (4, 2, 5), (6, 4, 2), (5, 2, 6), (3, 3, 3), (7, 5, 5)]:
        x, y = paddle.randn([n, m]), paddle.randn([n, r])
        _check(fast, sized_branch, x, y)
    # one capture where the relation holds, one where it does not
    assert fast.jit_stats.captures == 2, fast.jit_stats
    assert "static" not in str(fast.jit_stats.dynamic_shapes)


@pytest.mark.autograd
def test_gradients_through_a_dynamic_graph_equal_eager():
    paddle.seed(0)
    net = MLP()
    fast = jit_core.optimize(net, dynamic=True)
    for b in (2, 5, 7):
        x = paddle.randn([b, 8])
        net.clear_gradients()
        (net(x) ** 2).mean().backward()
        expected = [p.grad.numpy().copy() for p in net.parameters()]
        net.clear_gradients()
        (fast(x) ** 2).mean().backward()
        for p, want in zip(net.parameters(), expected):
            assert_same(p.grad, paddle.to_tensor(want))
    assert fast.jit_stats.captures == 1, fast.jit_stats


def squeeze_back(x):
    return x.unsqueeze(0).squeeze(0) * 2 + 1, x.sum()


def test_a_size_with_the_examples_number_of_elements_keeps_its_shape(backend):
    # was (onnxrt): the dynamic model's outputs were bent into the example's shape when
    # they had as many elements: [5, 3] came back as [3, 5]
    fast = jit_core.optimize(squeeze_back, backend=backend)
    for shape in ([2, 1], [3, 5], [5, 3], [15, 1], [1, 15], [3, 5]):
        x = paddle.rand(shape)
        assert_same(fast(x), squeeze_back(x))
    assert fast.jit_stats.captures <= 4, fast.jit_stats
