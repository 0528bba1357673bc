#pragma once
// Tokens -> statement tree, following Jinja2's grammar and operator precedence (jinja2/parser.py): conditional
// expression < or < and < not < comparisons and `in` < + - < ~ < * / // % < ** < unary - + < filters, tests,
// calls, attribute and subscript access.
#include <string_view>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace attnzoo::chat {

// Throws TemplateError (syntax) naming the line and column: unknown tags, filters and tests, unbalanced blocks,
// and expressions or blocks nested deeper than max_nesting.
Body parse(std::string_view source, int max_nesting, const LexOptions& options = {});

}  // namespace attnzoo::chat
