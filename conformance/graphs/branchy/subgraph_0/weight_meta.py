class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    original_name = "fc.weight"
    shape = [12, 12]
    dtype = "float32"
    min_val = float("-0.497654")
    max_val = float("0.497332")
    mean = float("-0.0262842")
    std = float("0.274112")
    data = None


class Program_weight_tensor_parameter_1:
    name = "parameter_1"
    original_name = "fc.bias"
    shape = [12]
    dtype = "float32"
    data = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
