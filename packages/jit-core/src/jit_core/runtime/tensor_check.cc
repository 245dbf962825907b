// jit_core's compiled tensor check for guards (built by jit_core/runtime/native.py).
//
// A guard checks every tensor argument of every call: its exact type, dtype and shape.
// From Python, Tensor.dtype costs ~0.1 us (Paddle builds its enum object) and
// Tensor.is_same_shape ~0.07 us; a model with 64 tensor inputs spends 12 us a call on
// them. Read here, from the paddle::Tensor that Paddle's public extension header says a
// Python tensor holds, the three checks cost ~0.02 us together.
//
// tensor_is(value, type, shape, dtype) -> bool
//   value is an instance of exactly `type` (a subclass of paddle.Tensor), holds a tensor,
//   its dtype is `dtype` (phi::DataType as an int, see dtype_code) and its dimensions are
//   the tuple of ints `shape`.
// dtype_code(tensor) -> int    the phi::DataType of a tensor
// init(paddle.Tensor)          the class every checked type must derive from

#include <Python.h>

#include "paddle/common/ddim.h"
#include "paddle/utils/pybind.h"

namespace {

PyTypeObject* tensor_type = nullptr;

bool holds_tensor(PyObject* value) {
  return tensor_type != nullptr && PyType_IsSubtype(Py_TYPE(value), tensor_type);
}

const paddle::Tensor& tensor_of(PyObject* value) {
  return reinterpret_cast<paddle::pybind::TensorObject*>(value)->tensor;
}

PyObject* tensor_is(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyTuple_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "tensor_is(value, type, shape: tuple, dtype: int)");
    return nullptr;
  }
  PyObject* value = args[0];
  if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != args[1] || !holds_tensor(value)) {
    Py_RETURN_FALSE;
  }
  long dtype = PyLong_AsLong(args[3]);
  if (dtype == -1 && PyErr_Occurred()) return nullptr;
  PyObject* shape = args[2];
  Py_ssize_t rank = PyTuple_GET_SIZE(shape);
  try {
    const paddle::Tensor& t = tensor_of(value);
    if (!t.defined() || static_cast<long>(t.dtype()) != dtype) Py_RETURN_FALSE;
    const common::DDim& dims = t.dims();
    if (dims.size() != rank) Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < rank; ++i) {
      long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
      if (size == -1 && PyErr_Occurred()) return nullptr;
      if (dims[static_cast<int>(i)] != size) Py_RETURN_FALSE;
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "Paddle raised reading a tensor's dtype or shape");
    return nullptr;
  }
  Py_RETURN_TRUE;
}

PyObject* dtype_code(PyObject*, PyObject* value) {
  if (!holds_tensor(value)) {
    PyErr_SetString(PyExc_TypeError, "dtype_code() takes a paddle.Tensor");
    return nullptr;
  }
  try {
    const paddle::Tensor& t = tensor_of(value);
    if (!t.defined()) {
      PyErr_SetString(PyExc_ValueError, "the tensor holds nothing");
      return nullptr;
    }
    return PyLong_FromLong(static_cast<long>(t.dtype()));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* init(PyObject*, PyObject* type) {
  if (!PyType_Check(type)) {
    PyErr_SetString(PyExc_TypeError, "init() takes paddle.Tensor");
    return nullptr;
  }
  Py_INCREF(type);
  Py_XDECREF(reinterpret_cast<PyObject*>(tensor_type));
  tensor_type = reinterpret_cast<PyTypeObject*>(type);
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"tensor_is", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(tensor_is)),
     METH_FASTCALL, "tensor_is(value, type, shape, dtype) -> bool"},
    {"dtype_code", dtype_code, METH_O, "dtype_code(tensor) -> int"},
    {"init", init, METH_O, "init(paddle.Tensor)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jit_tensor_check", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__jit_tensor_check(void) { return PyModule_Create(&module); }
