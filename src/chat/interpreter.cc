#include "chat/interpreter.h"

#include <algorithm>
#include <cmath>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"
#include "core/utf8.h"

namespace attnzoo::chat {

Value CallArgs::take(size_t index, std::string_view name, Value fallback) {
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    if (it->first == name) {
      Value v = std::move(it->second);
      kwargs.erase(it);
      return v;
    }
  }
  if (index < args.size()) return args[index];
  return fallback;
}

bool CallArgs::has(size_t index, std::string_view name) const {
  if (index < args.size()) return true;
  for (const auto& kw : kwargs) {
    if (kw.first == name) return true;
  }
  return false;
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(utf8::char_length(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

Interpreter::Place::Place(const Interpreter& in, int line, int column) : in(in), line(in.line_), column(in.column_) {
  in.line_ = line;
  in.column_ = column;
}
Interpreter::Place::~Place() {
  in.line_ = line;
  in.column_ = column;
}

Interpreter::Interpreter(const Limits& limits, std::string* out) : limits_(limits), out_(out) {}

void Interpreter::fail(const std::string& message) const {
  throw TemplateError(TemplateError::Kind::runtime, line_, column_, message);
}
void Interpreter::fail_limit(const std::string& message) const {
  throw TemplateError(TemplateError::Kind::limit, line_, column_, message);
}
void Interpreter::raise(const std::string& message) const {
  throw TemplateError(TemplateError::Kind::raised, line_, column_, message);
}

void Interpreter::charge(uint64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    fail_limit("the template did more than " + std::to_string(limits_.max_steps) +
               " steps of work (expressions, loop iterations, calls, items and bytes processed)");
  }
}

uint64_t Interpreter::size_steps(const Value& v) {
  if (v.is_string()) return v.as_string().size() / 16;
  if (v.is_list()) return v.as_list().size();
  if (v.is_dict()) return v.as_dict().items.size();
  return 0;
}

void Interpreter::check_string(const std::string& s) { reserve_bytes(s.size()); }

void Interpreter::check_growth(const std::string& s, size_t* charged) {
  charge(s.size() / 16 - std::min(*charged, s.size()) / 16);
  *charged = s.size();
  if (s.size() > limits_.max_output_bytes) reserve_bytes(s.size());
}

void Interpreter::reserve_bytes(uint64_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    fail_limit("a string of " + std::to_string(bytes) + " bytes exceeds the output limit of " +
               std::to_string(limits_.max_output_bytes) + " bytes");
  }
  charge(bytes / 16);
}

void Interpreter::reserve_items(uint64_t items) {
  if (items > limits_.max_list_items) {
    fail_limit("a list of " + std::to_string(items) + " items exceeds the limit of " +
               std::to_string(limits_.max_list_items) + " items");
  }
  charge(items);
}

void Interpreter::check_depth(const Value& v) const {
  if (v.depth() > limits_.max_value_depth) {
    fail_limit("lists and dicts nested deeper than " + std::to_string(limits_.max_value_depth) + " levels");
  }
}

void Interpreter::emit(std::string_view text) {
  charge(text.size() / 16);
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    fail_limit("the output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out_->append(text);
}

void Interpreter::render(const Body& body, const Dict& context) {
  Frame root;
  for (const auto& [k, v] : context.items) {
    if (!k.is_string()) fail("template variable names must be strings, got " + to_repr(k, *this));
    check_depth(v);
    root.vars.emplace_back(k.as_string(), v);
  }
  frame_ = &root;
  const Flow flow = exec(body);
  (void)flow;
  frame_ = nullptr;
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_; f; f = f->parent) {
    for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it) {
      if (it->first == name) return it->second;
    }
  }
  return global(name);
}

void Interpreter::assign(const std::string& name, Value v) {
  check_depth(v);
  for (auto& [k, x] : frame_->vars) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  frame_->vars.emplace_back(name, std::move(v));
}

std::string Interpreter::capture(const Body& body, Frame* frame) {
  std::string buffer;
  std::string* saved_out = out_;
  Frame* saved_frame = frame_;
  out_ = &buffer;
  frame_ = frame;
  try {
    exec(body);
  } catch (...) {
    out_ = saved_out;
    frame_ = saved_frame;
    throw;
  }
  out_ = saved_out;
  frame_ = saved_frame;
  return buffer;
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const Stmt& s : body) {
    const Flow f = exec(s);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  Place place(*this, s.line, s.column);
  charge(1);
  switch (s.kind) {
    case Stmt::Kind::text: emit(s.name); return Flow::normal;
    case Stmt::Kind::output: emit(to_str(eval(*s.expr), *this)); return Flow::normal;
    case Stmt::Kind::if_:
      for (const auto& [cond, body] : s.branches) {
        if (eval(*cond).truthy()) return exec(body);
      }
      return exec(s.else_body);
    case Stmt::Kind::for_: return exec_for(s);
    case Stmt::Kind::set: exec_set(s, eval(*s.expr)); return Flow::normal;
    case Stmt::Kind::set_block: {
      Value v = Value::string(capture(s.body, frame_));
      if (s.expr) v = eval_filter(*s.expr, &v);
      exec_set(s, std::move(v));
      return Flow::normal;
    }
    case Stmt::Kind::macro: assign(s.name, define_macro(s, frame_)); return Flow::normal;
    case Stmt::Kind::call_block: {
      const Expr& call = *s.expr;
      Value callee = eval(*call.a);
      CallArgs args = eval_args(call);
      args.kwargs.emplace_back("caller", define_macro(s, frame_));
      emit(to_str(this->call(callee, args, call.a->kind == Expr::Kind::name ? call.a->name : "the callee"), *this));
      return Flow::normal;
    }
    case Stmt::Kind::filter_block: {
      const Value body = Value::string(capture(s.body, frame_));
      emit(to_str(eval_filter(*s.expr, &body), *this));
      return Flow::normal;
    }
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Stmt& s, Value v) {
  if (!s.target_namespace.empty()) {
    Value ns = lookup(s.target_namespace);
    if (!ns.is_namespace()) fail("cannot assign attribute '" + s.name + "' on '" + s.target_namespace + "' (a " + ns.type_name() + ", not a namespace)");
    if (!s.name.empty() && s.name[0] == '_') fail("namespace attributes may not start with '_': " + s.name);
    // Namespaces are the one way values outlive the scope that made them: they hold data only, so no macro or
    // call-block caller (which refers to its scope) can be called after that scope has ended.
    if (v.is_namespace()) fail("a namespace cannot hold another namespace");
    if (v.is_callable()) fail("a namespace cannot hold a macro or function");
    check_depth(v);
    ns.as_namespace().attrs.set(s.name, std::move(v));
    return;
  }
  if (s.targets.size() == 1) return assign(s.targets[0], std::move(v));
  if (!v.is_list() || v.as_list().size() != s.targets.size()) {
    fail("cannot unpack " + std::string(v.type_name()) + " into " + std::to_string(s.targets.size()) + " names");
  }
  for (size_t i = 0; i < s.targets.size(); ++i) assign(s.targets[i], v.as_list()[i]);
}

namespace {
// The items a for loop walks: a list's items, a dict's keys, a string's characters; Undefined is empty.
List iteration_items(Interpreter& in, const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined()) return {};
  List out;
  if (v.is_dict()) {
    for (const auto& [k, x] : v.as_dict().items) out.push_back(k);
    return out;
  }
  if (v.is_string()) {
    in.reserve_items(text::length(v.as_string()));
    for (auto& c : code_points(v.as_string())) out.push_back(Value::string(std::move(c)));
    return out;
  }
  in.fail(std::string("'") + v.type_name() + "' object is not iterable");
}
}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  const List all = iteration_items(*this, eval(*s.expr));
  charge(all.size());
  Frame frame{{}, frame_};
  Frame* saved = frame_;
  frame_ = &frame;
  struct Restore {
    Interpreter* in;
    Frame* saved;
    ~Restore() { in->frame_ = saved; }
  } restore{this, saved};

  auto bind = [&](const Value& item) {
    if (s.targets.size() == 1) return assign(s.targets[0], item);
    if (!item.is_list() || item.as_list().size() != s.targets.size()) {
      fail("cannot unpack " + std::string(item.type_name()) + " into " + std::to_string(s.targets.size()) + " loop variables");
    }
    for (size_t i = 0; i < s.targets.size(); ++i) assign(s.targets[i], item.as_list()[i]);
  };
  List items;
  if (s.cond) {
    for (const Value& item : all) {
      frame.vars.clear();
      bind(item);
      if (eval(*s.cond).truthy()) items.push_back(item);
    }
    frame.vars.clear();
  } else {
    items = all;
  }
  const int64_t n = int64_t(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      fail_limit("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
    }
    frame.vars.clear();
    Dict loop;
    const std::pair<const char*, Value> fields[] = {
        {"index", Value::integer(i + 1)},    {"index0", Value::integer(i)},
        {"revindex", Value::integer(n - i)}, {"revindex0", Value::integer(n - i - 1)},
        {"first", Value::boolean(i == 0)},   {"last", Value::boolean(i == n - 1)},
        {"length", Value::integer(n)},       {"depth", Value::integer(1)},
        {"depth0", Value::integer(0)},
        {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("loop.previtem")},
        {"nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("loop.nextitem")}};
    for (const auto& [k, v] : fields) loop.items.emplace_back(Value::string(k), v);
    loop.set("cycle", Value::callable("loop.cycle", [i](Interpreter& in, CallArgs& a) {
      if (a.args.empty()) in.fail("loop.cycle() needs at least one value");
      return a.args[size_t(i) % a.args.size()];
    }));
    frame.vars.emplace_back("loop", Value::dict(std::move(loop)));
    bind(items[size_t(i)]);
    if (exec(s.body) == Flow::break_) break;
  }
  if (n == 0) {
    frame.vars.clear();
    exec(s.else_body);
  }
  return Flow::normal;
}

// A macro, or a call block's `caller`: a callable that renders `s.body` with its parameters bound, in a frame
// whose parent is `scope`, the frame it was defined in. Like Jinja's closures, it sees the loop variables and
// `set`s of the loop or macro around it, as they are when it is called. The callable cannot outlive `scope`:
// it is stored only in `scope` itself (or a frame inside it), since namespaces, lists and dicts refuse callables.
Value Interpreter::define_macro(const Stmt& s, Frame* scope) {
  const Stmt* stmt = &s;
  const std::string name = s.kind == Stmt::Kind::macro ? s.name : "caller";
  return Value::callable(name, [stmt, scope, name](Interpreter& in, CallArgs& a) {
    in.charge(1 + a.args.size() + a.kwargs.size());
    if (in.call_depth_ >= in.limits_.max_call_depth) {
      in.fail_limit("macro calls nested deeper than " + std::to_string(in.limits_.max_call_depth) + " levels");
    }
    if (a.args.size() > stmt->params.size()) {
      in.fail("macro '" + name + "' takes at most " + std::to_string(stmt->params.size()) + " arguments, got " +
              std::to_string(a.args.size()));
    }
    Frame frame{{}, scope};
    Value caller;
    for (auto& [k, v] : a.kwargs) {
      if (k == "caller") caller = v;
    }
    for (size_t i = 0; i < stmt->params.size(); ++i) {
      const std::string& p = stmt->params[i];
      Value v;
      bool found = false;
      if (i < a.args.size()) {
        v = a.args[i];
        found = true;
      }
      for (auto& [k, x] : a.kwargs) {
        if (k == p) {
          if (found) in.fail("macro '" + name + "' got multiple values for argument '" + p + "'");
          v = x;
          found = true;
        }
      }
      if (!found) {
        if (stmt->defaults[i]) {
          Frame* saved = in.frame_;
          in.frame_ = &frame;
          try {
            v = in.eval(*stmt->defaults[i]);
          } catch (...) {
            in.frame_ = saved;
            throw;
          }
          in.frame_ = saved;
        } else {
          v = Value::undefined(p);
        }
      }
      frame.vars.emplace_back(p, std::move(v));
    }
    for (auto& [k, x] : a.kwargs) {
      if (k == "caller") continue;
      bool known = false;
      for (const auto& p : stmt->params) known = known || p == k;
      if (!known) in.fail("macro '" + name + "' takes no keyword argument '" + k + "'");
    }
    // Always bound, so a macro inside a macro does not reach the outer one's caller (Jinja gives each its own).
    frame.vars.emplace_back("caller", caller.is_undefined() ? Value::undefined("caller") : caller);
    ++in.call_depth_;
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{in.call_depth_};
    return Value::string(in.capture(stmt->body, &frame));
  });
}

Value Interpreter::call(const Value& callee, CallArgs& args, std::string_view shown_name) {
  if (callee.is_undefined()) fail("'" + callee.undefined_name() + "' is undefined");
  if (!callee.is_callable()) fail("'" + std::string(shown_name) + "' (a " + callee.type_name() + ") is not callable");
  return callee.as_callable().fn(*this, args);
}

CallArgs Interpreter::eval_args(const Expr& e) {
  CallArgs a;
  for (const auto& x : e.items) a.args.push_back(eval(*x));
  for (const auto& [k, x] : e.kwargs) a.kwargs.emplace_back(k, eval(*x));
  return a;
}

Value Interpreter::eval_filter(const Expr& e, const Value* input) {
  Place place(*this, e.line, e.column);
  Value operand = !e.a ? *input : e.a->kind == Expr::Kind::filter && input ? eval_filter(*e.a, input) : eval(*e.a);
  CallArgs args = eval_args(e);
  return apply_filter(*this, e.name, std::move(operand), args);
}

Value Interpreter::eval(const Expr& e) {
  Place place(*this, e.line, e.column);
  charge(1);
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      List items;
      for (const auto& x : e.items) {
        items.push_back(eval(*x));
        if (items.back().is_namespace() || items.back().is_callable()) {
          fail(std::string("a list cannot hold a ") + items.back().type_name());
        }
      }
      Value v = Value::list(std::move(items), e.kind == Expr::Kind::tuple);
      check_depth(v);
      return v;
    }
    case Expr::Kind::dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        if (k.is_list() || k.is_dict() || k.is_namespace() || k.is_undefined()) {
          fail(std::string("unhashable type: '") + k.type_name() + "'");
        }
        Value v = eval(*e.items[i + 1]);
        if (v.is_namespace() || v.is_callable()) fail(std::string("a dict cannot hold a ") + v.type_name());
        d.set(std::move(k), std::move(v));
      }
      Value v = Value::dict(std::move(d));
      check_depth(v);
      return v;
    }
    case Expr::Kind::attr: return get_attr(*this, eval(*e.a), e.name);
    case Expr::Kind::item: return get_item(*this, eval(*e.a), eval(*e.b));
    case Expr::Kind::slice: {
      Value obj = eval(*e.a);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i) parts[i] = e.items[i] ? eval(*e.items[i]) : Value::none();
      return get_slice(*this, obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::unary: {
      Value v = eval(*e.a);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_int() || v.is_bool()) {
        if (e.name == "+") return Value::integer(v.as_int());
        if (v.as_int() == INT64_MIN) fail("integer overflow");
        return Value::integer(-v.as_int());
      }
      if (v.is_float()) return Value::floating(e.name == "-" ? -v.as_double() : v.as_double());
      fail("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
    }
    case Expr::Kind::binary: return eval_binary(e);
    case Expr::Kind::compare: return eval_compare(e);
    case Expr::Kind::cond:
      if (eval(*e.a).truthy()) return eval(*e.b);
      return e.c ? eval(*e.c) : Value::undefined("the missing else branch");
    case Expr::Kind::call: {
      Value callee = eval(*e.a);
      CallArgs args = eval_args(e);
      const std::string shown = e.a->kind == Expr::Kind::name || e.a->kind == Expr::Kind::attr ? e.a->name : "the callee";
      return call(callee, args, shown);
    }
    case Expr::Kind::filter: return eval_filter(e, nullptr);
    case Expr::Kind::test: {
      Value v = eval(*e.a);
      CallArgs args = eval_args(e);
      const bool r = apply_test(*this, e.name, v, args);
      return Value::boolean(r != e.negated);
    }
  }
  return Value();
}

}  // namespace attnzoo::chat
