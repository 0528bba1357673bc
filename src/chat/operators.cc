// Python's arithmetic, concatenation and comparison operators on template values. Integers are 64-bit: a result
// that would need more (Python's ints do not overflow) is an error rather than a wrapped number.
#include <cmath>

#include "chat/builtins.h"
#include "chat/interpreter.h"

namespace attnzoo::chat {
namespace {

[[noreturn]] void unsupported(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  in.fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

int64_t checked(Interpreter& in, bool overflow, int64_t r) {
  if (overflow) in.fail("integer overflow (the result needs more than 64 bits)");
  return r;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::string("") : Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && uint64_t(n) > in.limits().max_output_bytes / s.size()) {
      in.fail_limit("string repetition beyond the output limit");
    }
    std::string out;
    out.reserve(s.size() * size_t(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    in.check_string(out);
    return Value::string(std::move(out));
  }
  const List& items = seq.as_list();
  if (!items.empty() && uint64_t(n) > in.limits().max_list_items / items.size()) {
    in.fail_limit("list repetition beyond " + std::to_string(in.limits().max_list_items) + " items");
  }
  List out;
  in.charge(items.size() * uint64_t(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

Value arithmetic(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(in, overflow, r));
    }
    if (a.is_number() && b.is_number()) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      std::string s = a.as_string() + b.as_string();
      in.check_string(s);
      return Value::string(std::move(s));
    }
    if (a.is_list() && b.is_list()) {
      in.charge(Interpreter::size_steps(a) + Interpreter::size_steps(b));
      List items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      if (items.size() > in.limits().max_list_items) in.fail_limit("a list longer than the item limit");
      return Value::list(std::move(items), a.is_tuple());
    }
    unsupported(in, op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(in, overflow, r));
    }
    if (a.is_number() && b.is_number() && !(a.is_string() || b.is_string())) {
      return Value::floating(a.as_double() * b.as_double());
    }
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, a.as_int());
    unsupported(in, op, a, b);
  }
  if (!a.is_number() || !b.is_number()) unsupported(in, op, a, b);
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(in, overflow, r));
    }
    return Value::floating(a.as_double() - b.as_double());
  }
  if (op == "/") {
    if (b.as_double() == 0) in.fail("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) in.fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) in.fail("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    if (b.as_double() == 0) in.fail("float division or modulo by zero");
    if (op == "%") return Value::floating(py_fmod(a.as_double(), b.as_double()));
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) {
        if (__builtin_mul_overflow(r, base, &r)) in.fail("integer overflow (the result needs more than 64 bits)");
        if (r == 0 || r == 1) break;
        if (r == -1) {
          r = (e - 1) % 2 == 0 ? -1 : 1;
          break;
        }
      }
      return Value::integer(r);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  in.fail("unknown operator " + op);
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = eval(*e.a);
    return a.truthy() ? eval(*e.b) : a;
  }
  if (op == "or") {
    Value a = eval(*e.a);
    return a.truthy() ? a : eval(*e.b);
  }
  const Value a = eval(*e.a);
  const Value b = eval(*e.b);
  Place place(*this, e.line, e.column);
  if (op == "~") {
    std::string s = to_str(a, *this) + to_str(b, *this);
    check_string(s);
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) fail("'" + a.undefined_name() + "' is undefined");
  if (b.is_undefined()) fail("'" + b.undefined_name() + "' is undefined");
  return arithmetic(*this, op, a, b);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.a);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i]);
    Place place(*this, e.items[i]->line, e.items[i]->column);
    const std::string& op = e.ops[i];
    charge(size_steps(left) + size_steps(right));
    bool r;
    if (op == "==") r = equals(left, right, *this);
    else if (op == "!=") r = !equals(left, right, *this);
    else if (op == "in") r = contains(*this, right, left);
    else if (op == "notin") r = !contains(*this, right, left);
    else {
      bool ok;
      if (op == "<") r = less_than(left, right, &ok, *this);
      else if (op == ">") r = less_than(right, left, &ok, *this);
      else if (op == "<=") r = !less_than(right, left, &ok, *this);
      else r = !less_than(left, right, &ok, *this);
      if (!ok) {
        fail("'" + op + "' not supported between instances of '" + left.type_name() + "' and '" + right.type_name() + "'");
      }
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace attnzoo::chat
