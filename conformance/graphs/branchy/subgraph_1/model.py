import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, data_0):
        exp = paddle.exp(data_0)
        del data_0
        sub = exp - 1.0
        del exp
        return (sub,)
