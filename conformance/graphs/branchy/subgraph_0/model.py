import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, data_0):
        fc = paddle.nn.functional.linear(data_0, parameter_0, parameter_1)
        del data_0
        tanh = paddle.tanh(fc)
        del fc
        mean = tanh.mean()
        gt = mean > 0
        del mean
        return (tanh, gt)
