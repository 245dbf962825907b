import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, parameter_2, parameter_3, parameter_4, parameter_5, parameter_6, parameter_7, parameter_8, parameter_9, parameter_10, parameter_11, parameter_12, parameter_13, parameter_14, parameter_15, data_0, data_1, data_2):
        tok = paddle.nn.functional.embedding(data_0, parameter_0, padding_idx=None, sparse=False)
        del data_0
        pos = paddle.nn.functional.embedding(data_1, parameter_1, padding_idx=None, sparse=False)
        del data_1
        add = tok + pos
        del tok, pos
        norm0 = paddle.nn.functional.layer_norm(add, [16], parameter_2, parameter_3, 1e-05)
        del add
        qkv = paddle.nn.functional.linear(norm0, parameter_4, parameter_5)
        split = paddle.split(qkv, 3, axis=-1)
        del qkv
        getitem = split[0]
        getitem_1 = split[1]
        getitem_2 = split[2]
        del split
        reshape = getitem.reshape([2, 8, 2, 8])
        del getitem
        transpose = reshape.transpose([0, 2, 1, 3])
        del reshape
        reshape_1 = getitem_1.reshape([2, 8, 2, 8])
        del getitem_1
        transpose_1 = reshape_1.transpose([0, 2, 1, 3])
        del reshape_1
        matmul = paddle.matmul(transpose, transpose_1, transpose_y=True)
        del transpose, transpose_1
        truediv = matmul / 2.8284271247461903
        del matmul
        astype = data_2.astype('float32')
        del data_2
        unsqueeze = astype.unsqueeze([1, 2])
        del astype
        sub = 1.0 - unsqueeze
        del unsqueeze
        mul = sub * -10000.0
        del sub
        add_1 = truediv + mul
        del truediv, mul
        softmax = paddle.nn.functional.softmax(add_1, axis=-1)
        del add_1
        reshape_2 = getitem_2.reshape([2, 8, 2, 8])
        del getitem_2
        transpose_2 = reshape_2.transpose([0, 2, 1, 3])
        del reshape_2
        matmul_1 = paddle.matmul(softmax, transpose_2)
        del softmax, transpose_2
        transpose_3 = matmul_1.transpose([0, 2, 1, 3])
        del matmul_1
        reshape_3 = transpose_3.reshape([2, 8, 16])
        del transpose_3
        proj = paddle.nn.functional.linear(reshape_3, parameter_6, parameter_7)
        del reshape_3
        drop = proj
        del proj
        add_2 = norm0 + drop
        del norm0, drop
        norm1 = paddle.nn.functional.layer_norm(add_2, [16], parameter_8, parameter_9, 1e-05)
        del add_2
        ff1 = paddle.nn.functional.linear(norm1, parameter_10, parameter_11)
        gelu = paddle.nn.functional.gelu(ff1)
        del ff1
        ff2 = paddle.nn.functional.linear(gelu, parameter_12, parameter_13)
        del gelu
        add_3 = norm1 + ff2
        del norm1, ff2
        norm2 = paddle.nn.functional.layer_norm(add_3, [16], parameter_14, parameter_15, 1e-05)
        del add_3
        getitem_3 = norm2[:, 0]
        mean = norm2.mean(axis=1)
        del norm2
        return (getitem_3, mean)
