"""Paddle's own layers that are compositions of other layers in Python
(``paddle.nn.TransformerEncoder``, ``TransformerDecoder``, ``Transformer``,
``MultiHeadAttention``, which PaddleNLP's BERT and ERNIE are built from) are inlined like
a user's layer: the graph holds their operations, not one opaque call of the whole
encoder. Each test pins the counts, that no call of the composite is left in the graph's
code, and the values against eager Paddle."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from .helpers import assert_same


def capture(fast, *args):
    """The report of a fresh explain() of ``fast(*args)`` and its one graph's code."""
    report = jit_core.explain(fast, *args)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert not fast.jit_stats.eager_frames
    return report.graphs[0].code


class Encoder(paddle.nn.Layer):
    def __init__(self, dropout: float):
        super().__init__()
        self.emb = paddle.nn.Embedding(50, 16)
        layer = paddle.nn.TransformerEncoderLayer(16, 4, 32, dropout=dropout)
        self.encoder = paddle.nn.TransformerEncoder(layer, 2, norm=paddle.nn.LayerNorm(16))

    def forward(self, ids):
        mask = (ids == 0).astype("float32").unsqueeze([1, 2]) * -1e4
        return self.encoder(self.emb(ids), src_mask=mask)


def ids():
    return (paddle.arange(16).reshape([2, 8]) * 7) % 50


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["no dropout", "dropout, eval"])
def test_a_transformer_encoder_is_inlined(dropout, backend):
    paddle.seed(0)
    net = Encoder(dropout)
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    with paddle.no_grad():
        code = capture(fast, ids())
        assert "self.encoder(" not in code and "self_attn(" not in code, code
        assert_same(fast(ids()), net(ids()))


@pytest.mark.autograd
def test_a_transformer_encoder_in_training_draws_its_dropout_as_eager_does(backend):
    paddle.seed(0)
    net = Encoder(0.1)
    net.train()
    fast = jit_core.optimize(net, backend=backend)
    capture(fast, ids())
    paddle.seed(7)
    out = fast(ids())
    out.sum().backward()
    got = [p.grad.clone() for p in net.parameters()]
    net.clear_gradients()
    paddle.seed(7)
    expected = net(ids())
    expected.sum().backward()
    assert_same(out, expected)
    for g, e in zip(got, [p.grad for p in net.parameters()]):
        assert_same(g, e)


def test_a_transformer_with_its_masks_is_inlined(backend):
    paddle.seed(1)
    net = paddle.nn.Transformer(16, 4, 1, 1, 32, dropout=0.0)
    net.eval()
    src, tgt = paddle.rand([2, 5, 16]), paddle.rand([2, 3, 16])
    tgt_mask = net.generate_square_subsequent_mask(3)
    fast = jit_core.optimize(net, backend=backend)
    with paddle.no_grad():
        code = capture(fast, src, tgt, None, tgt_mask)
        assert "self.encoder(" not in code and "self.decoder(" not in code, code
        assert_same(fast(src, tgt, None, tgt_mask), net(src, tgt, None, tgt_mask))


def test_multi_head_attention_with_its_weights_and_a_bool_mask(backend):
    paddle.seed(2)
    mha = paddle.nn.MultiHeadAttention(16, 4, need_weights=True)
    mha.eval()
    q, kv = paddle.rand([2, 3, 16]), paddle.rand([2, 5, 16])
    mask = paddle.arange(5).reshape([1, 1, 1, 5]) < 4  # the last key is padding

    def attend(q, kv, mask):
        out, weights = mha(q, kv, kv, attn_mask=mask)
        return out * 2, weights

    fast = jit_core.optimize(attend, backend=backend)
    with paddle.no_grad():
        code = capture(fast, q, kv, mask)
        assert "mha(" not in code, code
        assert_same(fast(q, kv, mask), attend(q, kv, mask))
