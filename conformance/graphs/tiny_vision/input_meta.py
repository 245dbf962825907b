class Program_weight_tensor_data_0:
    name = "data_0"
    original_name = "x"
    shape = [2, 3, 16, 16]
    dtype = "float32"
    min_val = float("-3.36331")
    max_val = float("3.19639")
    mean = float("-0.0207166")
    std = float("1.02983")
    data = None
