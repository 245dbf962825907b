class Program_weight_tensor_data_0:
    name = "data_0"
    original_name = "ids"
    shape = [2, 8]
    dtype = "int64"
    data = [43, 35, 42, 26, 11, 56, 8, 58, 27, 36, 39, 28, 58, 27, 61, 49]


class Program_weight_tensor_data_1:
    name = "data_1"
    original_name = "positions"
    shape = [2, 8]
    dtype = "int64"
    data = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]


class Program_weight_tensor_data_2:
    name = "data_2"
    original_name = "mask"
    shape = [2, 8]
    dtype = "int64"
    data = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
