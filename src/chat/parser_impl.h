#pragma once
// The parser class shared by parser.cc (statements) and parser_expressions.cc (expressions); not an API.
#include <initializer_list>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/error.h"
#include "chat/lexer.h"

namespace attnzoo::chat::parsing {

using TK = Token::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting) : t_(std::move(tokens)), max_nesting_(max_nesting) {}

  Body parse_template() {
    std::string found;
    Body body = parse_body({}, &found);
    return body;
  }

 private:
  // Counts nesting on the way down so that hostile input cannot overflow the stack.
  struct Nest {
    Nest(Parser& p) : p(p) {
      if (++p.depth_ > p.max_nesting_) p.fail("expressions or blocks nested deeper than " + std::to_string(p.max_nesting_) + " levels");
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(cur(), message); }
  [[noreturn]] static void fail_at_node(const Expr& e, const std::string& message) {
    throw TemplateError(TemplateError::Kind::syntax, e.line, e.column, message);
  }
  [[noreturn]] static void fail_at(const Token& t, const std::string& message) {
    throw TemplateError(TemplateError::Kind::syntax, t.line, t.column, message);
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::text: return "template text";
      case TK::var_begin: return "'{{'";
      case TK::var_end: return "end of print statement '}}'";
      case TK::block_begin: return "'{%'";
      case TK::block_end: return "end of statement block '%}'";
      case TK::name: return "'" + t.text + "'";
      case TK::string: return "a string";
      case TK::integer:
      case TK::floating: return "a number";
      case TK::op: return "'" + t.text + "'";
      case TK::eof: return "end of template";
    }
    return "?";
  }

  bool is_op(const char* op) const { return cur().kind == TK::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TK::name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', found " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TK::name) fail("expected a name, found " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != TK::block_end) fail("expected end of statement block '%}', found " + describe(cur()));
    next();
  }

  static Stmt stmt(Stmt::Kind kind, const Token& t) {
    Stmt node;
    node.kind = kind;
    node.line = t.line;
    node.column = t.column;
    return node;
  }
  ExprPtr make(Expr::Kind kind, const Token& t) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = t.line;
    e->column = t.column;
    return e;
  }

  // ---- statements -----------------------------------------------------------------------------------------
  // Statements up to a block whose tag is one of `stops` (consumed: the tokens after the tag name are next).
  Body parse_body(const std::vector<std::string>& stops, std::string* found, const Token* opener = nullptr);
  void parse_statement(Body& body);
  Stmt parse_if(const Token& tag);
  std::vector<std::string> parse_names();
  Stmt parse_for(const Token& tag);
  Stmt parse_set(const Token& tag);
  void parse_params(Stmt& s);
  Stmt parse_macro(const Token& tag);
  Stmt parse_call_block(const Token& tag);

  // ---- expressions ----------------------------------------------------------------------------------------
  bool tuple_end(const char* extra) const;
  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end = nullptr, bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(const Token& t, std::string op, ExprPtr l, ExprPtr r);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr seal(ExprPtr e);
  ExprPtr parse_filtered_unary();
  ExprPtr left_assoc(std::initializer_list<const char*> ops, bool keywords, ExprPtr (Parser::*operand)());
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  void parse_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  // `| name(args) | name2 ...`; `operand` is null inside {% filter %} and block sets. With `one`, only one filter.
  ExprPtr parse_filter_chain(ExprPtr operand, bool one = false);
  ExprPtr parse_test(ExprPtr operand);

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_nesting_;
  int loop_depth_ = 0;
};

}  // namespace attnzoo::chat::parsing
