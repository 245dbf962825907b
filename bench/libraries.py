"""Library models (PaddleNLP, PaddleSeg, PaddleClas) per call, in one run: eager Paddle, Paddle's SOT
(`paddle.jit.to_static(net, full_graph=False)`) and jit_core's `optimize(net)` on the
paddle and onnxrt backends; then greedy decoding with a KV cache, by a loop of model
calls and by PaddleNLP's own `generate()`.

    ./dev bench-libs                     # sets up its own venv with the libraries
    python bench/libraries.py [--repeat N] [--backends paddle,onnxrt] [--tokens 12,48]

PaddleNLP's models in small configurations with random weights (2 layers, hidden size
64) on input ids of shape [2, 16]; PaddleSeg's PP-LiteSeg on a 256x256 image and
PaddleClas's classifiers on a 224x224 one, as their libraries build them; `eval()` under
`paddle.no_grad()`. The first table counts the graphs,
breaks and frames run eagerly on the paddle backend, times the first call (capture and
build, with an empty compile cache unless JIT_CORE_CACHE_DIR names one) and every call
after it. The second runs a decode loop of N tokens (one token per
step, the KV cache growing) and counts the captures: a loop that captures per token
makes more captures for more tokens. The third runs PaddleNLP's `generate()` itself under
`optimize`, for N new tokens. Every output is compared with eager Paddle first. The last
table times training steps (`bench/training.py`'s comparison): BERT and ERNIE fine-tuning
with a classification head, and a PaddleClas classifier, with SGD and AdamW
(`--tables training` prints it alone).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import logging
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)  # PaddleNLP logs its configs at INFO
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paddle  # noqa: E402
from _timing import per_call_us, sot_of  # noqa: E402

import jit_core  # noqa: E402

SMALL = dict(vocab_size=1000, num_hidden_layers=2, num_attention_heads=4)


def _models():
    """(name, make the layer, its input): PaddleNLP's language models on input ids, then
    PaddleSeg's and PaddleClas's vision models on an image."""
    return [(name, make, _ids) for name, make in _language_models()] + _vision_models()


def _ids() -> paddle.Tensor:
    return (paddle.arange(32, dtype="int64").reshape([2, 16]) * 37) % 1000


def _image(size: int):
    return lambda: paddle.rand([1, 3, size, size])


def _vision_models():
    """Segmentation and classification models as their libraries build them (random
    weights, no pretrained download)."""
    import paddleclas.ppcls.arch.backbone as clas
    from paddleseg.models import PPLiteSeg
    from paddleseg.models.backbones import STDC1

    return [
        ("PP-LiteSeg (STDC1)", lambda: PPLiteSeg(num_classes=19, backbone=STDC1()), _image(256)),
        ("MobileNetV3 small 0.35", clas.MobileNetV3_small_x0_35, _image(224)),
        ("ShuffleNetV2 0.25", clas.ShuffleNetV2_x0_25, _image(224)),
        ("PP-HGNetV2-B0", clas.PPHGNetV2_B0, _image(224)),
        ("Swin-T", clas.SwinTransformer_tiny_patch4_window7_224, _image(224)),
    ]


def _language_models():
    """(name, make the layer); each takes input ids."""
    import paddlenlp.transformers as t

    def hf(config, model, **extra):
        return lambda: getattr(t, model)(
            getattr(t, config)(
                hidden_size=64, intermediate_size=128, max_position_embeddings=256, **SMALL, **extra
            )
        )

    t5 = dict(vocab_size=1000, d_model=64, num_layers=2, num_heads=4, d_ff=128, d_kv=16)
    bart = dict(
        vocab_size=1000,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=256,
    )
    return [
        ("BERT", hf("BertConfig", "BertModel")),
        ("ERNIE", hf("ErnieConfig", "ErnieModel")),
        ("GPT", hf("GPTConfig", "GPTModel")),
        ("LLaMA", hf("LlamaConfig", "LlamaModel")),
        ("T5 encoder", lambda: t.T5EncoderModel(t.T5Config(**t5))),
        ("BART", lambda: t.BartModel(t.BartConfig(**bart))),
    ]


def _decoders():
    import paddlenlp.transformers as t

    def causal(config, model):
        return lambda: getattr(t, model)(
            getattr(t, config)(
                hidden_size=64, intermediate_size=128, max_position_embeddings=256, **SMALL
            )
        )

    return [
        ("GPT", causal("GPTConfig", "GPTForCausalLM")),
        ("LLaMA", causal("LlamaConfig", "LlamaForCausalLM")),
    ]


def _tensors(out) -> list:
    if isinstance(out, paddle.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):  # PaddleNLP's ModelOutput
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _same(got, expected) -> bool:
    got, expected = _tensors(got), _tensors(expected)
    return len(got) == len(expected) and all(
        bool(paddle.allclose(g.astype("float64"), e.astype("float64"), 1e-4, 1e-4))
        for g, e in zip(got, expected)
    )


def _optimize(net, backend: str):
    """``optimize`` with ``fallback=True`` where the backend takes it: a graph it cannot
    export runs on paddle (and the table says so) instead of failing the row."""
    try:
        return jit_core.optimize(net, backend=backend, fallback=True)
    except TypeError:  # a backend without the option (paddle runs everything)
        return jit_core.optimize(net, backend=backend)


def _first_call_ms(fn, x) -> float:
    start = time.perf_counter()
    fn(x)
    return (time.perf_counter() - start) * 1e3


def forwards(backends, repeat: int) -> None:
    head = " | ".join(f"jit_core {b}" for b in backends)
    firsts = " | ".join(f"first call, {b}" for b in backends)
    print(f"| model | graphs / breaks / eager frames | {firsts} | eager | Paddle SOT | {head} |")
    print("|---|---|" + "---|" * len(backends) + "---|---|" + "---|" * len(backends))
    for name, make, example in _models():
        paddle.seed(0)
        net = make()
        net.eval()
        x = example()
        expected = net(x)
        probe = jit_core.optimize(net)
        report = jit_core.explain(probe, x)
        eager_frames = len(probe.jit_stats.eager_frames)
        counts = f"{report.graph_count} / {report.break_count} / {eager_frames}"
        fast, firsts = [], []
        for b in backends:
            fn = _optimize(net, b)
            with warnings.catch_warnings(record=True) as fell_back:
                warnings.simplefilter("always")
                firsts.append(f"{_first_call_ms(fn, x):.0f} ms")
            if any("runs on the paddle backend" in str(w.message) for w in fell_back):
                firsts[-1] += " (some graphs on paddle)"
            if not _same(fn(x), expected):
                raise SystemExit(f"{name} on {b}: a result differs from eager Paddle")
            fast.append(fn)
        try:
            sot = sot_of(net)
            with contextlib.redirect_stdout(io.StringIO()):
                sot_ok = _same(sot(x), expected)
        except Exception as e:  # noqa: BLE001 - the peer's failure is a cell of the table
            sot, sot_ok = None, f"fails ({type(e).__name__})"
        fns = [net] + ([sot] if sot is not None and sot_ok is True else []) + fast
        times = per_call_us(fns, (x,), repeat, rounds=7, warmup=5, quiet=True)
        eager_us = times[0]
        sot_cell = f"{times[1]:.0f} us" if len(fns) > 1 + len(fast) else (sot_ok or "differs")
        cells = " | ".join(f"{t:.0f} us ({eager_us / t:.2f}x)" for t in times[-len(fast) :])
        print(
            f"| {name} | {counts} | {' | '.join(firsts)} | {eager_us:.0f} us | {sot_cell} "
            f"| {cells} |"
        )


def _decode(model, prompt, tokens: int) -> list:
    past, x, out = None, prompt, []
    for _ in range(tokens):
        o = model(x, past_key_values=past, use_cache=True, return_dict=True)
        past = o.past_key_values
        x = o.logits[:, -1:].argmax(-1)
        out.append(int(x))
    return out


def _decoder_table(title: str, subtitle: str, backends) -> None:
    """The title and head of a table of decoding runs, one column per backend."""
    print()
    print(title)
    print(subtitle)
    print()
    head = " | ".join(f"jit_core {b}" for b in backends)
    print(f"| model | tokens | eager | {head} | captures ({', '.join(backends)}) |")
    print("|---|---|---|" + "---|" * len(backends) + "---|")


def _decoder_runs(token_counts):
    """(name, tokens, a fresh decoder in eval mode) for each decoder and length."""
    for name, make in _decoders():
        for tokens in token_counts:
            paddle.seed(0)
            net = make()
            net.eval()
            yield name, tokens, net


def decode_loops(backends, token_counts) -> None:
    prompt = paddle.to_tensor([[5, 6, 7, 8]], dtype="int64")
    _decoder_table(
        "greedy decoding with a KV cache, one token per step: ms per token, and the",
        "captures the whole loop made (the same for every length: no capture per token)",
        backends,
    )
    for name, tokens, net in _decoder_runs(token_counts):
        expected = _decode(net, prompt, tokens)
        cells, captures = [], []
        for b in backends:
            fn = _optimize(net, b)
            if _decode(fn, prompt, tokens) != expected:
                raise SystemExit(f"{name} on {b}: the decoded tokens differ from eager")
            captures.append(str(fn.jit_stats.captures))
            cells.append(fn)
        per_token = []
        for fn in [net, *cells]:
            start = time.perf_counter()
            for _ in range(3):
                _decode(fn, prompt, tokens)
            per_token.append((time.perf_counter() - start) / 3 / tokens * 1e3)
        eager_ms = per_token[0]
        jit = " | ".join(f"{t:.2f} ms ({eager_ms / t:.2f}x)" for t in per_token[1:])
        print(f"| {name} | {tokens} | {eager_ms:.2f} ms | {jit} | {', '.join(captures)} |")


def generate_calls(backends, token_counts) -> None:
    """``optimize(model.generate)``: PaddleNLP's whole generation loop (its configs, logits
    processors, stopping criteria and the model's calls), greedy with a KV cache."""
    prompt = paddle.to_tensor([[5, 6, 7, 8]], dtype="int64")
    _decoder_table(
        "`optimize(model.generate)`, greedy with a KV cache: ms per call after the first",
        "two, and the captures the calls made (the same for every length: none per token)",
        backends,
    )
    for name, tokens, net in _decoder_runs(token_counts):
        kw = dict(
            # PaddleNLP 2.8.1's LLaMA makes a float mask of its own, which its eager
            # generate() then rejects (paddle.where wants a bool condition)
            attention_mask=paddle.ones_like(prompt),
            max_new_tokens=tokens,
            decode_strategy="greedy_search",
            use_cache=True,
        )
        expected = net.generate(prompt, **kw)[0].tolist()
        fns, captures = [functools.partial(net.generate, prompt, **kw)], []
        for b in backends:
            fn = _optimize(net.generate, b)
            for _ in range(2):
                if fn(prompt, **kw)[0].tolist() != expected:
                    raise SystemExit(f"{name} generate() on {b}: tokens differ from eager")
            captures.append(str(fn.jit_stats.captures))
            fns.append(functools.partial(fn, prompt, **kw))
        times = per_call_us(fns, (), 1, rounds=7, warmup=1, quiet=True)
        eager_ms = times[0] / 1e3
        jit = " | ".join(f"{t / 1e3:.1f} ms ({times[0] / t:.2f}x)" for t in times[1:])
        print(f"| {name} | {tokens} | {eager_ms:.1f} ms | {jit} | {', '.join(captures)} |")


def _fine_tuning():
    """(name, make the model, a batch of inputs and labels, the loss): a sequence
    classification head on BERT and ERNIE (fine-tuning), and a PaddleClas classifier."""
    import paddle.nn.functional as F
    import paddleclas.ppcls.arch.backbone as clas
    import paddlenlp.transformers as t

    def classifier(config, model):
        def make():
            cfg = getattr(t, config)(
                hidden_size=64, intermediate_size=128, max_position_embeddings=256, **SMALL
            )
            cfg.num_labels = 3
            return getattr(t, model)(cfg)

        return make

    def text():
        return _ids(), paddle.to_tensor([[0], [2]])

    def logits(out, y):
        out = out[0] if isinstance(out, (tuple, list)) else out
        out = getattr(out, "logits", out)
        return F.cross_entropy(out, y)

    return [
        ("BERT", classifier("BertConfig", "BertForSequenceClassification"), text, logits),
        ("ERNIE", classifier("ErnieConfig", "ErnieForSequenceClassification"), text, logits),
        (
            "MobileNetV3 small 0.35",
            lambda: clas.MobileNetV3_small_x0_35(class_num=10),
            lambda: (paddle.rand([4, 3, 96, 96]), paddle.randint(0, 10, [4, 1])),
            logits,
        ),
    ]


def training_steps(rounds: int, steps: int) -> None:
    """A training step of each (``bench/training.py``'s: eager, ``optimize(step)`` on the
    paddle and auto backends, SOT), with SGD and AdamW."""
    import training

    print(
        "\nTraining steps (train(), dropout 0.1 as configured): speedup per step against "
        f"eager, first step, loss after {steps} steps (= bit for bit, ~ rtol 1e-5)"
    )
    print(training.header(22))
    for name, make, data, loss_fn in _fine_tuning():
        for optimizer in ("sgd", "adamw"):
            r = training.compare(make, data, loss_fn, optimizer, rounds, steps)
            print(training.line(name, optimizer, r, 22), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--backends", default="paddle,onnxrt")
    parser.add_argument("--tokens", default="12,48")
    parser.add_argument("--steps", type=int, default=20, help="training steps compared")
    parser.add_argument(
        "--tables", default="forwards,decode,generate,training", help="which tables to print"
    )
    args = parser.parse_args()
    try:
        import paddleclas  # noqa: F401
        import paddlenlp
        import paddleseg  # noqa: F401
    except ImportError:
        raise SystemExit(
            "bench/libraries.py needs PaddleNLP: `./dev bench-libs` runs it in a venv of its "
            "own with the versions it was written for"
        ) from None
    if not os.environ.get("JIT_CORE_CACHE_DIR"):
        # first calls as on a new machine: no compile cache from an earlier run
        import tempfile

        os.environ["JIT_CORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="jit_bench_libs_")
    installed = jit_core.backends()
    backends = [
        b for b in args.backends.split(",") if b in installed and not installed[b].unavailable
    ]
    py = "{}.{}".format(*sys.version_info[:2])
    print(
        f"Python {py}, paddle {paddle.__version__}, paddlenlp {paddlenlp.__version__}; "
        "eval(), no_grad; per call after the first (speedups against eager)"
    )
    print()
    tables = args.tables.split(",")
    tokens = [int(n) for n in args.tokens.split(",")]
    with paddle.no_grad():
        if "forwards" in tables:
            forwards(backends, args.repeat)
        if "decode" in tables:
            decode_loops(backends, tokens)
        if "generate" in tables:
            generate_calls(backends, tokens)
    if "training" in tables:
        training_steps(7, args.steps)


if __name__ == "__main__":
    main()
