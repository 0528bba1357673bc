// The Python module attnzoo._core. Each family binds itself in its own file; this one wires them together
// and maps C++ errors to the Python exceptions the API promises.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "core/error.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "attnzoo native kernels (use the attnzoo package, not this module directly)";
  m.attr("__version__") = ATTNZOO_VERSION;  // project(VERSION) in CMakeLists.txt, the one source
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const attnzoo::DTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const attnzoo::ArgumentError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const attnzoo::Interrupted&) {
      attnzoo::py::raise_interrupted();
    }
  });
  attnzoo::py::bind_core(m);
  attnzoo::py::bind_softmax(m);
  attnzoo::py::bind_decode(m);
  attnzoo::py::bind_mla(m);
  attnzoo::py::bind_linear_gla(m);
  attnzoo::py::bind_linear_delta(m);
  attnzoo::py::bind_linear_ssm(m);
  attnzoo::py::bind_linear_s4(m);
  attnzoo::py::bind_bench(m);
  attnzoo::py::bind_tokenizer(m);
  attnzoo::py::bind_model(m);
  attnzoo::py::bind_gguf(m);
  attnzoo::py::bind_runtime(m);
  attnzoo::py::bind_engine(m);
  attnzoo::py::bind_serving(m);
  attnzoo::py::bind_explain(m);
  attnzoo::py::bind_quant(m);
  attnzoo::py::bind_chat(m);
  attnzoo::py::bind_cache_spec(m);
  attnzoo::py::bind_convert(m);
  attnzoo::py::bind_perplexity(m);
}
