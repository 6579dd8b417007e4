// The library's errors as the Python package's exception classes (python/stagecraft/_errors.py).
#include "exception_translation.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/error.h"
#include "executor/backend.h"
#include "graph/errors.h"
#include "networks/registry.h"
#include "profiler/device_spec.h"
#include "scheduler/schedule.h"

namespace py = pybind11;

namespace stagecraft::python {
namespace {


// Raises stagecraft.<name> (python/stagecraft/_errors.py) with the C++ message.
void raise_as(const char* name, const std::exception& e) {
  try {
    py::object cls = py::module_::import("stagecraft._errors").attr(name);
    PyErr_SetString(cls.ptr(), e.what());
  } catch (py::error_already_set&) {
    PyErr_SetString(PyExc_RuntimeError, e.what());  // the module without its package
  }
}

// The name of the stagecraft.<name> class of a C++ error: its type's name, or that of its nearest
// base with a class of its own.
const char* python_class_of(const Error& e) {
  if (dynamic_cast<const graph::ShapeError*>(&e)) return "ShapeError";
  if (dynamic_cast<const graph::FormatError*>(&e)) return "FormatError";
  if (dynamic_cast<const graph::GraphError*>(&e)) return "GraphError";
  if (dynamic_cast<const networks::NetworkError*>(&e)) return "NetworkError";
  if (dynamic_cast<const scheduler::ScheduleError*>(&e)) return "ScheduleError";
  if (dynamic_cast<const executor::BackendError*>(&e)) return "BackendError";
  if (dynamic_cast<const profiler::DeviceSpecError*>(&e)) return "DeviceSpecError";
  if (dynamic_cast<const IoError*>(&e)) return "IoError";
  if (dynamic_cast<const UsageError*>(&e)) return "UsageError";
  return "Error";
}

}  // namespace

void translate_error(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const graph::ConstantInputError& e) {
    // stagecraft.ConstantInputError(message, inputs): the names go with it.
    try {
      py::object cls = py::module_::import("stagecraft._errors").attr("ConstantInputError");
      py::object error = cls(e.what(), py::tuple(py::cast(e.inputs())));
      PyErr_SetObject(cls.ptr(), error.ptr());
    } catch (py::error_already_set&) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  } catch (const Error& e) {
    raise_as(python_class_of(e), e);
  }
}

}  // namespace stagecraft::python
