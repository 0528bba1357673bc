// Statements: the template body, block tags and their nesting; expressions are in parser_expressions.cc.
#include "chat/parser.h"

#include <algorithm>

#include "chat/parser_impl.h"

namespace attnzoo::chat {
namespace parsing {

Body Parser::parse_body(const std::vector<std::string>& stops, std::string* found, const Token* opener) {
  Nest nest(*this);
  Body body;
  for (;;) {
    const Token& t = cur();
    if (t.kind == TK::eof) {
      if (stops.empty()) return body;
      std::string want;
      for (const auto& s : stops) want += (want.empty() ? "'" : " or '") + s + "'";
      fail_at(opener ? *opener : t, "unexpected end of template: the block opened here needs " + want);
    }
    if (t.kind == TK::text) {
      Stmt s = stmt(Stmt::Kind::text, t);
      s.name = t.text;
      body.push_back(std::move(s));
      next();
      continue;
    }
    if (t.kind == TK::var_begin) {
      next();
      Stmt s = stmt(Stmt::Kind::output, t);
      s.expr = parse_tuple(true);
      if (cur().kind != TK::var_end) fail("expected end of print statement '}}', found " + describe(cur()));
      next();
      body.push_back(std::move(s));
      continue;
    }
    if (t.kind != TK::block_begin) fail("unexpected " + describe(t));
    next();
    const Token& tag = cur();
    if (tag.kind != TK::name) fail("expected a tag name, found " + describe(tag));
    if (std::find(stops.begin(), stops.end(), tag.text) != stops.end()) {
      *found = tag.text;
      next();
      return body;
    }
    parse_statement(body);
  }
}

void Parser::parse_statement(Body& body) {
  const Token tag = cur();
  const std::string& n = tag.text;
  next();
  if (n == "if") return body.push_back(parse_if(tag));
  if (n == "for") return body.push_back(parse_for(tag));
  if (n == "set") return body.push_back(parse_set(tag));
  if (n == "macro") return body.push_back(parse_macro(tag));
  if (n == "call") return body.push_back(parse_call_block(tag));
  if (n == "filter") {
    Stmt s = stmt(Stmt::Kind::filter_block, tag);
    s.expr = parse_filter_chain(nullptr);
    expect_block_end();
    std::string found;
    s.body = parse_body({"endfilter"}, &found, &tag);
    expect_block_end();
    return body.push_back(std::move(s));
  }
  if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) fail_at(tag, "'" + n + "' outside of a loop");
    expect_block_end();
    return body.push_back(stmt(n == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, tag));
  }
  if (n == "generation") {  // transformers' assistant-mask marker: renders its body unchanged
    expect_block_end();
    std::string found;
    Body inner = parse_body({"endgeneration"}, &found, &tag);
    expect_block_end();
    for (auto& s : inner) body.push_back(std::move(s));
    return;
  }
  static const char* kEnds[] = {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "elif", "else",
                                "endgeneration", "endraw"};
  for (const char* e : kEnds) {
    if (n == e) fail_at(tag, "unexpected '" + n + "' (no open block it could close)");
  }
  fail_at(tag, "unknown or unsupported tag '" + n + "'");
}

Stmt Parser::parse_if(const Token& tag) {
  Stmt s = stmt(Stmt::Kind::if_, tag);
  ExprPtr cond = parse_tuple(true);
  expect_block_end();
  for (;;) {
    std::string found;
    Body body = parse_body({"elif", "else", "endif"}, &found, &tag);
    s.branches.emplace_back(std::move(cond), std::move(body));
    if (found == "elif") {
      cond = parse_tuple(true);
      expect_block_end();
      continue;
    }
    if (found == "else") {
      expect_block_end();
      s.else_body = parse_body({"endif"}, &found, &tag);
    }
    expect_block_end();
    return s;
  }
}

std::vector<std::string> Parser::parse_names() {
  std::vector<std::string> names;
  const bool parens = skip_op("(");
  do {
    names.push_back(expect_name());
  } while (skip_op(",") && cur().kind == TK::name);
  if (parens) expect_op(")");
  return names;
}

Stmt Parser::parse_for(const Token& tag) {
  Stmt s = stmt(Stmt::Kind::for_, tag);
  s.targets = parse_names();
  if (!skip_name("in")) fail("expected 'in' in a for loop, found " + describe(cur()));
  s.expr = parse_tuple(false, "if");
  if (skip_name("if")) s.cond = parse_expression(true);
  if (is_name("recursive")) fail("recursive for loops are not supported");
  expect_block_end();
  ++loop_depth_;
  std::string found;
  s.body = parse_body({"else", "endfor"}, &found, &tag);
  --loop_depth_;
  if (found == "else") {
    expect_block_end();
    s.else_body = parse_body({"endfor"}, &found, &tag);
  }
  expect_block_end();
  return s;
}

Stmt Parser::parse_set(const Token& tag) {
  Stmt s = stmt(Stmt::Kind::set, tag);
  if (cur().kind == TK::name && peek().kind == TK::op && peek().text == ".") {
    s.target_namespace = expect_name();
    next();
    s.name = expect_name();
  } else {
    s.targets = parse_names();
  }
  if (skip_op("=")) {
    s.expr = parse_tuple(true);
    expect_block_end();
    return s;
  }
  if (!s.target_namespace.empty() || s.targets.size() != 1) fail("a block set assigns to one plain name");
  s.kind = Stmt::Kind::set_block;
  if (is_op("|")) s.expr = parse_filter_chain(nullptr);
  expect_block_end();
  std::string found;
  s.body = parse_body({"endset"}, &found, &tag);
  expect_block_end();
  return s;
}

void Parser::parse_params(Stmt& s) {
  expect_op("(");
  while (!skip_op(")")) {
    if (!s.params.empty()) expect_op(",");
    if (skip_op(")")) break;
    s.params.push_back(expect_name());
    s.defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
  }
}

Stmt Parser::parse_macro(const Token& tag) {
  Stmt s = stmt(Stmt::Kind::macro, tag);
  s.name = expect_name();
  parse_params(s);
  expect_block_end();
  const int loops = loop_depth_;
  loop_depth_ = 0;
  std::string found;
  s.body = parse_body({"endmacro"}, &found, &tag);
  loop_depth_ = loops;
  if (cur().kind == TK::name && cur().text == s.name) next();
  expect_block_end();
  return s;
}

Stmt Parser::parse_call_block(const Token& tag) {
  Stmt s = stmt(Stmt::Kind::call_block, tag);
  if (is_op("(")) parse_params(s);
  s.expr = parse_expression(true);
  if (s.expr->kind != Expr::Kind::call) fail_at(tag, "a call block needs a call expression");
  expect_block_end();
  std::string found;
  s.body = parse_body({"endcall"}, &found, &tag);
  expect_block_end();
  return s;
}

}  // namespace parsing

Body parse(std::string_view source, int max_nesting, const LexOptions& options) {
  return parsing::Parser(tokenize(source, options), max_nesting).parse_template();
}

}  // namespace attnzoo::chat
