class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    original_name = "conv1.weight"
    shape = [8, 3, 3, 3]
    dtype = "float32"
    min_val = float("-0.712759")
    max_val = float("0.717652")
    mean = float("-0.0161306")
    std = float("0.262439")
    data = None


class Program_weight_tensor_parameter_1:
    name = "parameter_1"
    original_name = "conv1.bias"
    shape = [8]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_2:
    name = "parameter_2"
    original_name = "bn1._mean"
    shape = [8]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_3:
    name = "parameter_3"
    original_name = "bn1._variance"
    shape = [8]
    dtype = "float32"
    data = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


class Program_weight_tensor_parameter_4:
    name = "parameter_4"
    original_name = "bn1.weight"
    shape = [8]
    dtype = "float32"
    data = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


class Program_weight_tensor_parameter_5:
    name = "parameter_5"
    original_name = "bn1.bias"
    shape = [8]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_6:
    name = "parameter_6"
    original_name = "conv2.weight"
    shape = [16, 8, 3, 3]
    dtype = "float32"
    min_val = float("-0.534173")
    max_val = float("0.484472")
    mean = float("-0.00078627")
    std = float("0.165003")
    data = None


class Program_weight_tensor_parameter_7:
    name = "parameter_7"
    original_name = "conv2.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_8:
    name = "parameter_8"
    original_name = "head.weight"
    shape = [16, 10]
    dtype = "float32"
    min_val = float("-0.472158")
    max_val = float("0.474282")
    mean = float("-0.0252883")
    std = float("0.278198")
    data = None


class Program_weight_tensor_parameter_9:
    name = "parameter_9"
    original_name = "head.bias"
    shape = [10]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
