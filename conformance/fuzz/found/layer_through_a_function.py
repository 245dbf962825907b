import paddle
import paddle.nn.functional as F

LOG = []
COUNT = 0


class Box:
    """The object argument: its attributes are side effects to compare."""

    def __init__(self):
        self.count = 0
        self.items = []
        self.last = None


class Gate(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.scale = self.create_parameter(
            [1], default_initializer=paddle.nn.initializer.Constant(1.5)
        )

    def forward(self, a):
        if a.mean() > 0:
            return a * self.scale
        return a - self.scale


def _h_rec(a, n):
    if n <= 0:
        return a
    return _h_rec(a * 0.5, n - 1)


def _h_raise(n, c):
    if n > c:
        raise ValueError('helper ' + str(n))
    return n + 1


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 3)
        self.w = self.create_parameter([1])
        self.bias = self.create_parameter([1], is_bias=True)
        self.act = paddle.nn.ReLU()
        self.gate = Gate()
        self.calls = 0
        self.hist = []
        self.last = None

    def forward(self, x, k, m, obj):
        global COUNT
        s1 = x.mean()
        lst = [3, 1, 2]
        d = {'k0': 1}
        g0 = 0.5
        t2 = F.normalize(x, axis=-1)
        n3 = int(k.numpy().sum())
        for j4 in lst[:4]:
            try:
                q6 = (k * k) % 7
                t7 = x * paddle.cast(q6, x.dtype)
                t2 = self.fc(t2)
                lst = [v8 + 2 for v8 in lst]
                pass
            except ValueError as e5:
                LOG.append(type(e5).__name__)
                pass
            finally:
                LOG.append('finally')
            j9 = 0
            while j9 < 3:
                j9 += 1
                t2 = x * paddle.cast(k, x.dtype)
                if False:
                    break
            s11 = paddle.zeros([])
            for j10, r12 in enumerate(x):
                s11 = s11 + r12.sum() * j10
                lst = list(range(3))
            for j14 in range(m % 5):
                t2 = self.fc(t2)
                t15 = _h_rec(t2, 2)
        j16 = 0
        while j16 < 1:
            j16 += 1
            with paddle.no_grad():
                t17 = self.act(t2) * self.w
                d.update({'k1': 4, 'z': n3})
                k = k + 2
        s18 = x.sum(axis=0).sum()
        for j19 in range(len(lst) % 4):
            pass
        t20 = self.fc(x)
        n21 = self.calls
        with paddle.no_grad():
            n22 = t2.shape[0] + 2
            try:
                if s1 > 0:
                    return (x, k, m, s1, lst, d, g0, t2, n3, j16, s18, t20, n21, n22, )
                t20.add_(x)
                obj.items.append(j16)
                n24 = _h_raise(n21, 0)
            except ValueError as e23:
                LOG.append(type(e23).__name__)
                q25 = paddle.cast(x < 0.0, 'int64') * 3
            if any(v > 3 for v in lst):
                def fn26(u):
                    return u * t2 + t2
                t27 = fn26(x)
                n28 = max(lst, default=0)
                t29 = t27
            else:
                t30 = paddle.clip(x, min=-1.0, max=1.0)
                COUNT += 1
                lam31 = lambda u: u * 2.0 + t2
                t32 = lam31(x)
                lam33 = lambda u: u * 2.0 + t30
                t34 = lam33(t20)
        def bump35():
            nonlocal n21
            n21 = (n21 + 1) % 97
            return n21
        n36 = bump35()
        return (x, k, m, s1, lst, d, g0, t2, n3, j16, s18, t20, n21, n36, )
