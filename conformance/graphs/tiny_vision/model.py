import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, parameter_2, parameter_3, parameter_4, parameter_5, parameter_6, parameter_7, parameter_8, parameter_9, data_0):
        conv1 = paddle.nn.functional.conv2d(data_0, parameter_0, parameter_1, stride=[1, 1], padding=1, dilation=[1, 1], groups=1, data_format='NCHW')
        del data_0
        bn1 = paddle.nn.functional.batch_norm(conv1, parameter_2, parameter_3, parameter_4, parameter_5, training=False, momentum=0.9, epsilon=1e-05, data_format='NCHW', use_global_stats=None)
        del conv1
        relu = paddle.nn.functional.relu(bn1)
        del bn1
        pool = paddle.nn.functional.max_pool2d(relu, kernel_size=2, stride=None, padding=0, ceil_mode=False, return_mask=False, data_format='NCHW')
        del relu
        conv2 = paddle.nn.functional.conv2d(pool, parameter_6, parameter_7, stride=[2, 2], padding=0, dilation=[1, 1], groups=1, data_format='NCHW')
        del pool
        relu_1 = paddle.nn.functional.relu(conv2)
        del conv2
        gap = paddle.nn.functional.adaptive_avg_pool2d(relu_1, output_size=1, data_format='NCHW')
        del relu_1
        flat = paddle.flatten(gap, start_axis=1, stop_axis=-1)
        del gap
        head = paddle.nn.functional.linear(flat, parameter_8, parameter_9)
        del flat
        softmax = paddle.nn.functional.softmax(head, axis=-1)
        del head
        return (softmax,)
