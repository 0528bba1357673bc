#pragma once
// Renders a parsed template: a tree-walking interpreter with Jinja2's scoping (a for loop or a macro call opens a
// scope; `set` inside one does not leak out; namespaces are how templates carry state out of loops). Every
// resource is bounded (see Limits), so a hostile template ends with a named TemplateError, never a hang, a stack
// overflow or unbounded memory.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace attnzoo::chat {

struct Limits {
  int max_nesting = 128;                    // parser: expressions and blocks inside each other
  int max_call_depth = 64;                  // macro calls inside macro calls
  int max_value_depth = 256;                // lists / dicts inside each other (built by the template or given)
  size_t max_output_bytes = 16u << 20;      // the rendered text, and any string the template builds
  uint64_t max_loop_iterations = 1000000;   // all for-loop iterations of one render together
  size_t max_list_items = 1000000;          // any list a builtin builds: range(), products, batch, split, characters
  // All work of one render: one step per expression evaluated, statement run, loop iteration and macro call,
  // plus one per item (or 16 bytes) a filter, method or string operation goes through.
  uint64_t max_steps = 50000000;  // about a second or two
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The argument at `index` or named `name` (removed from kwargs), or `fallback` when absent.
  Value take(size_t index, std::string_view name, Value fallback = Value());
  bool has(size_t index, std::string_view name) const;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, std::string* out);

  // Renders `body` with `context` as the template's global variables.
  void render(const Body& body, const Dict& context);

  Value eval(const Expr& e);
  [[noreturn]] void fail(const std::string& message) const;         // a runtime error here
  [[noreturn]] void fail_limit(const std::string& message) const;   // a resource limit hit here
  [[noreturn]] void raise(const std::string& message) const;        // the template's raise_exception
  void check_string(const std::string& s);  // within max_output_bytes; charges its bytes as steps
  // For a string built piece by piece: within max_output_bytes, charging only the bytes added since the last
  // call (*charged is how many were charged before), so building n bytes costs n/16 steps however many pieces.
  void check_growth(const std::string& s, size_t* charged);
  // A result of `bytes` bytes or `items` items the caller is about to build: charged, and refused beyond the
  // limits before anything is allocated.
  void reserve_bytes(uint64_t bytes);
  void reserve_items(uint64_t items);
  void check_depth(const Value& v) const;   // within max_value_depth
  void charge(uint64_t steps);              // within max_steps
  static uint64_t size_steps(const Value& v);  // what going through v costs: items, or 16-byte chunks of text
  const Limits& limits() const { return limits_; }
  // Calls a callable value (macro, builtin or bound method).
  Value call(const Value& callee, CallArgs& args, std::string_view shown_name);

 private:
  enum class Flow { normal, break_, continue_ };
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    Frame* parent = nullptr;
  };
  struct Place {
    Place(const Interpreter& in, int line, int column);
    ~Place();
    const Interpreter& in;
    int line, column;
  };

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s, Value v);
  Value define_macro(const Stmt& s, Frame* scope);
  std::string capture(const Body& body, Frame* frame);
  void emit(std::string_view text);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_filter(const Expr& e, const Value* input);  // input: a filter block's text
  CallArgs eval_args(const Expr& e);

  Limits limits_;
  std::string* out_;
  Frame* frame_ = nullptr;
  int call_depth_ = 0;
  uint64_t iterations_ = 0;
  uint64_t steps_ = 0;
  mutable int line_ = 0, column_ = 0;
};

// Python str.__getitem__-style helpers on UTF-8 text, shared by the interpreter and the builtins.
std::vector<std::string> code_points(const std::string& s);

}  // namespace attnzoo::chat
