"""Writes the GraphNet-format samples next to this file with ``jit_core.extract()``:
``python conformance/graphs/make_graphs.py`` (then commit what changed).

Three small models of our own, seeded: a vision net (one graph), a BERT-style encoder
layer (one graph) and a model whose tensor-dependent branch and print break it into three
graphs. They are kept small (a few thousand parameters) so that ``jit-eval`` runs them on
every backend and Python in CI in seconds; weights larger than GraphNet's literal limit
are written as metas (range, mean, std), as GraphNet writes them.
"""

from __future__ import annotations

import os
import shutil

import paddle
import paddle.nn.functional as F

import jit_core

HERE = os.path.dirname(os.path.abspath(__file__))


class TinyVision(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = paddle.nn.Conv2D(3, 8, 3, padding=1)
        self.bn1 = paddle.nn.BatchNorm2D(8)
        self.pool = paddle.nn.MaxPool2D(2)
        self.conv2 = paddle.nn.Conv2D(8, 16, 3, stride=2)
        self.gap = paddle.nn.AdaptiveAvgPool2D(1)
        self.flat = paddle.nn.Flatten()
        self.head = paddle.nn.Linear(16, 10)

    def forward(self, x):
        h = self.pool(F.relu(self.bn1(self.conv1(x))))
        h = F.relu(self.conv2(h))
        return F.softmax(self.head(self.flat(self.gap(h))), axis=-1)


class TinyEncoder(paddle.nn.Layer):
    """One BERT-style layer: token and position embeddings, self-attention with a padding
    mask, a GELU feed-forward block, post-layer norms."""

    def __init__(self, vocab: int = 64, dim: int = 16, heads: int = 2, length: int = 8):
        super().__init__()
        self.heads = heads
        self.tok = paddle.nn.Embedding(vocab, dim)
        self.pos = paddle.nn.Embedding(length, dim)
        self.norm0 = paddle.nn.LayerNorm(dim)
        self.qkv = paddle.nn.Linear(dim, 3 * dim)
        self.proj = paddle.nn.Linear(dim, dim)
        self.norm1 = paddle.nn.LayerNorm(dim)
        self.ff1 = paddle.nn.Linear(dim, 2 * dim)
        self.ff2 = paddle.nn.Linear(2 * dim, dim)
        self.norm2 = paddle.nn.LayerNorm(dim)
        self.drop = paddle.nn.Dropout(0.1)

    def forward(self, ids, positions, mask):
        b, n = ids.shape
        h = self.norm0(self.tok(ids) + self.pos(positions))
        q, k, v = paddle.split(self.qkv(h), 3, axis=-1)
        d = q.shape[-1] // self.heads

        def heads(t):
            return t.reshape([b, n, self.heads, d]).transpose([0, 2, 1, 3])

        att = paddle.matmul(heads(q), heads(k), transpose_y=True) / (d**0.5)
        att = att + (1.0 - mask.astype("float32").unsqueeze([1, 2])) * -1e4
        ctx = paddle.matmul(F.softmax(att, axis=-1), heads(v))
        ctx = ctx.transpose([0, 2, 1, 3]).reshape([b, n, self.heads * d])
        h = self.norm1(h + self.drop(self.proj(ctx)))
        h = self.norm2(h + self.ff2(F.gelu(self.ff1(h))))
        return h[:, 0], h.mean(axis=1)


class Branchy(paddle.nn.Layer):
    """Graph breaks: a branch on a tensor's value, then a print; three graphs."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(12, 12)
        self.norm = paddle.nn.LayerNorm(12)
        self.out = paddle.nn.Linear(12, 4)

    def forward(self, x):
        h = paddle.tanh(self.fc(x))
        if h.mean() > 0:
            h = h * 2.0 + 1.0
        else:
            h = paddle.exp(h) - 1.0
        print("", end="")
        return self.out(self.norm(h)).sum(axis=-1)


def models():
    paddle.seed(2024)
    vision = TinyVision()
    encoder = TinyEncoder()
    branchy = Branchy()
    ids = paddle.randint(1, 64, [2, 8])
    mask = paddle.to_tensor([[1] * 8, [1] * 5 + [0] * 3], dtype="int64")
    positions = paddle.arange(8).unsqueeze(0).expand([2, 8])
    return [
        ("tiny_vision", vision, (paddle.randn([2, 3, 16, 16]),)),
        ("tiny_encoder", encoder, (ids, positions, mask)),
        ("branchy", branchy, (paddle.randn([3, 12]) + 0.5,)),
    ]


def main() -> None:
    for name, model, args in models():
        model.eval()
        shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)
        with paddle.no_grad():
            result = jit_core.extract(model, *args, out=HERE, name=name)
        print(f"{name}: {len(result.graphs)} graph(s) -> {os.path.relpath(result.path)}")


if __name__ == "__main__":
    main()
