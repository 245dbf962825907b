class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    original_name = "tok.weight"
    shape = [64, 16]
    dtype = "float32"
    min_val = float("-0.273551")
    max_val = float("0.273674")
    mean = float("0.00651504")
    std = float("0.159393")
    data = None


class Program_weight_tensor_parameter_1:
    name = "parameter_1"
    original_name = "pos.weight"
    shape = [8, 16]
    dtype = "float32"
    min_val = float("-0.493824")
    max_val = float("0.499658")
    mean = float("0.00220532")
    std = float("0.295146")
    data = None


class Program_weight_tensor_parameter_2:
    name = "parameter_2"
    original_name = "norm0.weight"
    shape = [16]
    dtype = "float32"
    data = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


class Program_weight_tensor_parameter_3:
    name = "parameter_3"
    original_name = "norm0.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_4:
    name = "parameter_4"
    original_name = "qkv.weight"
    shape = [16, 48]
    dtype = "float32"
    min_val = float("-0.305932")
    max_val = float("0.305519")
    mean = float("-0.00353323")
    std = float("0.177825")
    data = None


class Program_weight_tensor_parameter_5:
    name = "parameter_5"
    original_name = "qkv.bias"
    shape = [48]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_6:
    name = "parameter_6"
    original_name = "proj.weight"
    shape = [16, 16]
    dtype = "float32"
    min_val = float("-0.412608")
    max_val = float("0.432683")
    mean = float("0.00966475")
    std = float("0.255125")
    data = None


class Program_weight_tensor_parameter_7:
    name = "parameter_7"
    original_name = "proj.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_8:
    name = "parameter_8"
    original_name = "norm1.weight"
    shape = [16]
    dtype = "float32"
    data = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


class Program_weight_tensor_parameter_9:
    name = "parameter_9"
    original_name = "norm1.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_10:
    name = "parameter_10"
    original_name = "ff1.weight"
    shape = [16, 32]
    dtype = "float32"
    min_val = float("-0.352497")
    max_val = float("0.352506")
    mean = float("-0.0128069")
    std = float("0.1922")
    data = None


class Program_weight_tensor_parameter_11:
    name = "parameter_11"
    original_name = "ff1.bias"
    shape = [32]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_12:
    name = "parameter_12"
    original_name = "ff2.weight"
    shape = [32, 16]
    dtype = "float32"
    min_val = float("-0.349353")
    max_val = float("0.349208")
    mean = float("-0.00840263")
    std = float("0.194195")
    data = None


class Program_weight_tensor_parameter_13:
    name = "parameter_13"
    original_name = "ff2.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


class Program_weight_tensor_parameter_14:
    name = "parameter_14"
    original_name = "norm2.weight"
    shape = [16]
    dtype = "float32"
    data = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


class Program_weight_tensor_parameter_15:
    name = "parameter_15"
    original_name = "norm2.bias"
    shape = [16]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
