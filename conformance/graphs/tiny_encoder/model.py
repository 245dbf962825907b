import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, parameter_2, parameter_3, parameter_4, parameter_5, parameter_6, parameter_7, parameter_8, parameter_9, parameter_10, parameter_11, parameter_12, parameter_13, parameter_14, parameter_15, data_0, data_1, data_2):
        tok = paddle.nn.functional.embedding(data_0, parameter_0, padding_idx=None, sparse=False)
        pos = paddle.nn.functional.embedding(data_1, parameter_1, padding_idx=None, sparse=False)
        add = tok + pos
        norm0 = paddle.nn.functional.layer_norm(add, [16], parameter_2, parameter_3, 1e-05)
        qkv = paddle.nn.functional.linear(norm0, parameter_4, parameter_5)
        split = paddle.split(qkv, 3, axis=-1)
        getitem = split[0]
        getitem_1 = split[1]
        getitem_2 = split[2]
        reshape = getitem.reshape([2, 8, 2, 8])
        transpose = reshape.transpose([0, 2, 1, 3])
        reshape_1 = getitem_1.reshape([2, 8, 2, 8])
        transpose_1 = reshape_1.transpose([0, 2, 1, 3])
        matmul = paddle.matmul(transpose, transpose_1, transpose_y=True)
        truediv = matmul / 2.8284271247461903
        astype = data_2.astype('float32')
        unsqueeze = astype.unsqueeze([1, 2])
        sub = 1.0 - unsqueeze
        mul = sub * -10000.0
        add_1 = truediv + mul
        softmax = paddle.nn.functional.softmax(add_1, axis=-1)
        reshape_2 = getitem_2.reshape([2, 8, 2, 8])
        transpose_2 = reshape_2.transpose([0, 2, 1, 3])
        matmul_1 = paddle.matmul(softmax, transpose_2)
        transpose_3 = matmul_1.transpose([0, 2, 1, 3])
        reshape_3 = transpose_3.reshape([2, 8, 16])
        proj = paddle.nn.functional.linear(reshape_3, parameter_6, parameter_7)
        drop = proj
        add_2 = norm0 + drop
        norm1 = paddle.nn.functional.layer_norm(add_2, [16], parameter_8, parameter_9, 1e-05)
        ff1 = paddle.nn.functional.linear(norm1, parameter_10, parameter_11)
        gelu = paddle.nn.functional.gelu(ff1)
        ff2 = paddle.nn.functional.linear(gelu, parameter_12, parameter_13)
        add_3 = norm1 + ff2
        norm2 = paddle.nn.functional.layer_norm(add_3, [16], parameter_14, parameter_15, 1e-05)
        getitem_3 = norm2[:, 0]
        mean = norm2.mean(axis=1)
        return (getitem_3, mean)
