import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, parameter_2, parameter_3, data_0):
        norm = paddle.nn.functional.layer_norm(data_0, [12], parameter_0, parameter_1, 1e-05)
        del data_0
        out = paddle.nn.functional.linear(norm, parameter_2, parameter_3)
        del norm
        sum_1 = out.sum(axis=-1)
        del out
        return (sum_1,)
