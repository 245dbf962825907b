"""An optimizer's ``step()`` inside a compiled training step runs as the update kernels
Paddle's code calls (``jit_core.runtime.update_kernels``), once they are recorded: the
parameters and the optimizer's state must stay eager Paddle's bit for bit, step after
step, including where what decided the recorded path changes in the middle of training.
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core.runtime.update_kernels import replay_of

from .test_training import Net, assert_same_state, batches, make, run_both, state_of

pytestmark = pytest.mark.autograd


def sgd(params):
    return paddle.optimizer.SGD(0.1, parameters=params)


def momentum(params):
    return paddle.optimizer.Momentum(0.1, parameters=params, weight_decay=0.01)


def adam(params):
    sched = paddle.optimizer.lr.StepDecay(0.01, step_size=2, gamma=0.5)
    return paddle.optimizer.Adam(sched, parameters=params)


def adamw(params):
    return paddle.optimizer.AdamW(
        0.01, parameters=params, weight_decay=0.1, apply_decay_param_fun=lambda n: "b_" not in n
    )


def adam_multi_tensor(params):
    return paddle.optimizer.Adam(0.01, parameters=params, use_multi_tensor=True)


def momentum_multi_tensor(params):
    return paddle.optimizer.Momentum(0.1, parameters=params, use_multi_tensor=True)


#: optimizer, its update kernel, whether that is one call for all parameters
REPLAYED = {
    "sgd": (sgd, "sgd_", False),
    "momentum": (momentum, "momentum_", False),
    "adam": (adam, "adam_", False),
    "adamw": (adamw, "adamw_", False),
    "adam-multi-tensor": (adam_multi_tensor, "merged_adam_", True),
    "momentum-multi-tensor": (momentum_multi_tensor, "merged_momentum_", True),
}


def build(setup):
    """``test_training``'s step (no dropout), the scheduler stepped where there is one."""

    def with_scheduler(params):
        opt = setup(params)
        lr = opt._learning_rate
        return opt, lr if isinstance(lr, paddle.optimizer.lr.LRScheduler) else None

    return make(with_scheduler, dropout=0.0)


def trained_alike(setup, steps: int, backend: str = "paddle"):
    """``steps`` steps eagerly and compiled, each state after them eager's: the compiled
    side's net, optimizer and step, and the replay of its update."""
    net_e, opt_e, step_e = build(setup)
    net_j, opt_j, step_j = build(setup)
    run_both(step_e, jit_core.optimize(step_j, backend=backend), batches(steps))
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    return net_j, opt_j, step_j, replay_of(opt_j)


@pytest.mark.parametrize("name", sorted(REPLAYED))
def test_a_step_after_the_second_runs_its_update_kernels(name, backend):
    setup, kernel, merged = REPLAYED[name]
    net_j, opt_j, step_j, replay = trained_alike(setup, 6, backend)
    # the first step makes the accumulators, the second is recorded
    assert replay is not None and replay.replayed == 4, replay and replay.describe()
    n = 1 if merged else len([p for p in net_j.parameters() if not p.stop_gradient])
    assert f"({kernel} x{n})" in replay.describe()
    assert ("scheduler's rate" in replay.describe()) == (name == "adam")
    x, y = batches(1)[0]
    report = str(jit_core.explain(step_j, x, y))
    assert f"{type(opt_j).__name__}.step(): its update kernels alone ({kernel} x{n})" in report


def changes_mid_training(net, opt, i):
    """What changes the path Paddle's ``step()`` takes, between steps."""
    if i == 3:
        opt.set_lr(0.02)
    if i == 4:
        net.fc1.bias.stop_gradient = True
    if i == 6:
        net.fc1.bias.stop_gradient = False


def test_what_decides_the_update_changes_between_steps(backend):
    """A new learning rate, a parameter frozen and thawed: each step that would take
    another path runs Paddle's own ``step()``, and the next is recorded again."""
    net_e, opt_e, step_e = build(sgd)
    net_j, opt_j, step_j = build(sgd)
    fast = jit_core.optimize(step_j, backend=backend)
    for i, (x, y) in enumerate(batches(9)):
        changes_mid_training(net_e, opt_e, i)
        changes_mid_training(net_j, opt_j, i)
        np.testing.assert_array_equal(fast(x, y).numpy(), step_e(x, y).numpy(), err_msg=str(i))
        assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    replay = replay_of(opt_j)
    # step 0 makes the accumulators, 1 is recorded, 2 replayed; 3 (a new rate), 4 (frozen)
    # and 6 (thawed) recorded again, 5, 7 and 8 replayed
    assert (replay.replayed, replay.recordings) == (4, 4), replay.describe()
    assert replay.describe().startswith("its update kernels alone")


def test_a_parameter_without_a_gradient_is_not_updated(backend):
    """A step whose loss does not reach ``fc2`` leaves it as Paddle does."""
    paddle.seed(1)
    nets = [Net(dropout=0.0) for _ in range(2)]
    nets[1].set_state_dict(nets[0].state_dict())
    opts = [paddle.optimizer.AdamW(0.01, parameters=n.parameters()) for n in nets]

    def make_step(net, opt):
        def step(x):
            loss = F.relu(net.bn(net.fc1(x))).mean()
            loss.backward()
            opt.step()
            opt.clear_grad(set_to_zero=False)
            return loss

        return step

    eager = make_step(nets[0], opts[0])
    fast = jit_core.optimize(make_step(nets[1], opts[1]), backend=backend)
    for x, _ in batches(5):
        np.testing.assert_array_equal(fast(x).numpy(), eager(x).numpy())
    assert_same_state(state_of(nets[1], opts[1]), state_of(nets[0], opts[0]))
    assert replay_of(opts[1]).replayed == 3


@pytest.mark.parametrize(
    "clip", [paddle.nn.ClipGradByGlobalNorm, paddle.nn.ClipGradByNorm, paddle.nn.ClipGradByValue]
)
def test_a_gradient_clip_runs_as_paddles_step_calls_it(clip, backend):
    """The clip is Paddle's own, called on the (parameter, gradient) pairs as Paddle's
    step calls it; the kernels take what it returns."""

    def setup(p):
        return paddle.optimizer.AdamW(0.05, parameters=p, grad_clip=clip(0.05))

    *_, replay = trained_alike(setup, 5, backend)
    assert replay.replayed == 3, replay.describe()
    assert replay.describe().endswith(f"after its {clip.__name__}")


def test_a_regularizer_runs_paddles_step_and_says_why(backend):
    """SGD's weight decay is a regularizer: kernels of its own, not replayed."""

    def setup(p):
        return paddle.optimizer.SGD(0.1, parameters=p, weight_decay=0.01)

    *_, replay = trained_alike(setup, 5, backend)
    assert replay.replayed == 0
    assert replay.describe().startswith("Paddle's own step(): it calls "), replay.describe()


def test_a_subclass_runs_its_own_step():
    """A subclass of SGD may change the update: nothing is replayed."""

    class MySGD(paddle.optimizer.SGD):
        pass

    *_, replay = trained_alike(lambda p: MySGD(0.1, parameters=p), 4)
    assert replay is None
