// KernelScope: what a binding holds while native code runs (see bindings.h). The Ctrl-C poll runs on the thread
// that submitted the kernel, between its tasks, at most every ThreadPool::kPollIntervalMs: it takes the GIL
// for a moment and asks Python whether a signal is pending (PyErr_CheckSignals runs the Python-level handler,
// which for SIGINT raises KeyboardInterrupt). Only the main thread handles signals, so other threads never poll
// and never contend for the GIL.
#include <Python.h>

#include "bindings.h"
#include "core/error.h"

namespace attnzoo::py {
namespace {

// The exception the poll fetched, restored when Interrupted reaches the translator on the same thread.
thread_local PyObject* t_type = nullptr;
thread_local PyObject* t_value = nullptr;
thread_local PyObject* t_traceback = nullptr;

}  // namespace

bool python_signal_pending() {
  nb::gil_scoped_acquire acquire;
  if (PyErr_CheckSignals() == 0) return false;
  Py_XDECREF(t_type);
  Py_XDECREF(t_value);
  Py_XDECREF(t_traceback);
  PyErr_Fetch(&t_type, &t_value, &t_traceback);
  return true;
}

bool on_main_thread() {
  static const unsigned long main_ident = [] {
    nb::object threading = nb::module_::import_("threading");
    return nb::cast<unsigned long>(threading.attr("main_thread")().attr("ident"));
  }();
  return PyThread_get_thread_ident() == main_ident;
}

KernelScope::KernelScope(bool interruptible) : main_thread_(on_main_thread()), release_(), pin_() {
  if (interruptible && main_thread_) interrupt_.emplace(&python_signal_pending);
}

KernelScope::~KernelScope() = default;

void raise_interrupted() {
  if (t_type != nullptr) {
    PyErr_Restore(t_type, t_value, t_traceback);
    t_type = t_value = t_traceback = nullptr;
  } else {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  }
}

}  // namespace attnzoo::py
