#pragma once
// The library's errors as the Python package's exception classes (python/stagecraft/_errors.py).
#include <exception>

namespace stagecraft::python {

/// Raises the stagecraft.<Class> of the C++ error in `p` (pybind11's exception translator): the
/// class of its type or of its nearest base with one; ConstantInputError keeps its input names.
void translate_error(std::exception_ptr p);

}  // namespace stagecraft::python
